-- Hybrid recall search (version 3).
--
-- Every message gets a search document built by memgpt-core's DocumentBuilder: the analysed
-- (stemmed) terms of the message, with those of the two conversation turns before it for user
-- and assistant messages, joined by spaces. Conversation messages are numbered per agent
-- (`turn`) so a commit can find the turns before its first message, and may have an embedding.
-- Documents of rows written before this migration are built when the store opens (the store
-- records the analyzer version in memgpt_meta and rebuilds documents and the full-text tables
-- whenever it changes).

ALTER TABLE messages ADD COLUMN turn INTEGER;
ALTER TABLE messages ADD COLUMN document TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN document_length INTEGER NOT NULL DEFAULT 0;
-- 1 once the message's embedding is stored (conversation messages only).
ALTER TABLE messages ADD COLUMN embedded INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_by_agent_turn ON messages (agent_id, turn) WHERE turn IS NOT NULL;
CREATE INDEX messages_unembedded ON messages (agent_id, seq) WHERE turn IS NOT NULL AND embedded = 0;

-- The full-text index of message documents (rowid = messages.seq), replacing messages_fts
-- (which indexed unstemmed single messages). The tokenizer only splits the stored terms apart
-- again.
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE message_terms USING fts5 (
    agent, body,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);
-- Document frequencies of the terms (BM25's statistics).
CREATE VIRTUAL TABLE message_terms_vocab USING fts5vocab (message_terms, 'col');

-- Conversation message embeddings. `seq` is the order they were stored in (a message is
-- embedded after it is committed when embedding is deferred or failed), which the usearch
-- recall index uses as its watermark.
CREATE TABLE message_embeddings (
    seq         INTEGER PRIMARY KEY,
    message_seq INTEGER NOT NULL UNIQUE,
    agent_id    BLOB NOT NULL,
    embedding   BLOB NOT NULL           -- little-endian f32 of the store's embedding dimension
) STRICT;
CREATE INDEX message_embeddings_by_agent ON message_embeddings (agent_id, seq);

-- Archival passages are searched with the same analyser: their full-text index holds stemmed
-- terms too (rebuilt on open like the message documents).
DROP TABLE passages_fts;
CREATE VIRTUAL TABLE passage_terms USING fts5 (
    agent, body,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);
-- Tags of passages (from their `tags` metadata), for filtered archival search.
CREATE TABLE passage_tags (
    passage_seq INTEGER NOT NULL,
    agent_id    BLOB NOT NULL,
    tag         TEXT NOT NULL,
    PRIMARY KEY (agent_id, tag, passage_seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX passage_tags_by_passage ON passage_tags (passage_seq);
CREATE INDEX passages_by_agent_time ON passages (agent_id, created_at);
INSERT OR IGNORE INTO passage_tags (passage_seq, agent_id, tag)
    SELECT p.seq, p.agent_id, t.value
    FROM passages p, json_each(p.metadata, '$.tags') t
    WHERE json_type(p.metadata, '$.tags') = 'array' AND t.type = 'text';
