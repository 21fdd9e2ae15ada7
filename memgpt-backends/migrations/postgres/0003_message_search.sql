-- Hybrid recall search (version 3).
--
-- `search_text` now holds each row's search document as memgpt-core's analyzer builds it:
-- stemmed terms joined by spaces; for user and assistant messages, the message with the two
-- conversation turns before it (the generated `search` tsvector follows). Rows written before
-- this migration are rebuilt when the store opens (the analyzer version is recorded in
-- memgpt_meta and a change rebuilds every document).

ALTER TABLE messages ADD COLUMN turn bigint;
ALTER TABLE messages ADD COLUMN document_length integer NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN embedded boolean NOT NULL DEFAULT false;
CREATE INDEX messages_by_agent_turn ON messages (agent_id, turn) WHERE turn IS NOT NULL;
CREATE INDEX messages_unembedded ON messages (agent_id, seq) WHERE turn IS NOT NULL AND NOT embedded;

-- Conversation message embeddings (an HNSW index over `embedding::vector(D)` is created when
-- the store's embedding space is fixed, as for passages). `seq` is the order they were stored.
CREATE TABLE message_embeddings (
    seq         bigserial PRIMARY KEY,
    message_seq bigint NOT NULL UNIQUE,
    agent_id    uuid NOT NULL,
    embedding   vector NOT NULL
);
CREATE INDEX message_embeddings_by_agent ON message_embeddings (agent_id, seq);

-- BM25's collection statistics, one row per agent (summed over the store): how many message
-- documents and how many terms they hold. Per agent so concurrent commits of different agents
-- never wait for each other.
CREATE TABLE recall_statistics (
    agent_id  uuid PRIMARY KEY,
    documents bigint NOT NULL,
    terms     bigint NOT NULL
);

-- Filtered archival search: by tag (the `tags` metadata array) and by time.
CREATE INDEX passages_tags ON passages USING gin ((metadata -> 'tags'));
CREATE INDEX passages_by_agent_time ON passages (agent_id, created_at);
