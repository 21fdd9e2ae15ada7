-- Archival search ranked by memgpt-core (version 5).
--
-- Stores now hand passage candidates to memgpt-core's ranking, which scores them with BM25 over
-- collection statistics the store keeps: per agent, how many passages it holds and how many
-- words (analysed terms, the space-separated words of `search_text`) they have together.

CREATE TABLE archival_statistics (
    agent_id  uuid PRIMARY KEY,
    documents bigint NOT NULL,
    terms     bigint NOT NULL
);
INSERT INTO archival_statistics (agent_id, documents, terms)
SELECT agent_id, count(*), coalesce(sum(cardinality(string_to_array(search_text, ' '))), 0)
FROM passages GROUP BY agent_id;
