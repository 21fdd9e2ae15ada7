-- The passages waiting for an embedding, per agent (version 9): with a tantivy archival index,
-- a hybrid search counts the ones matching its words from these rows (usually none) instead of
-- from every match.
CREATE INDEX passages_unembedded ON passages (agent_id, seq) WHERE embedding IS NULL;
