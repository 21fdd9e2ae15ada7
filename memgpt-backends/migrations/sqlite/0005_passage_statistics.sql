-- Archival search ranked by memgpt-core (version 5).
--
-- Stores now hand passage candidates to memgpt-core's ranking, which scores them with BM25 over
-- collection statistics the store keeps: per agent, how many passages it holds and how many
-- words (analysed terms) they have together, and per term, in how many passages it occurs
-- (from the full-text table). The counts of rows written before this migration are filled in
-- when the store opens (`passage_statistics` is missing from memgpt_meta until then).

CREATE TABLE archival_statistics (
    agent_id  BLOB PRIMARY KEY,
    documents INTEGER NOT NULL,
    terms     INTEGER NOT NULL
) STRICT;
-- Document frequencies of the passage terms (BM25's statistics).
CREATE VIRTUAL TABLE passage_terms_vocab USING fts5vocab (passage_terms, 'col');
