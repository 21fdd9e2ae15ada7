-- Long messages are embedded as several windows (version 4).
--
-- A conversation message longer than the embedder's window gets one embedding per window,
-- numbered from 0 (`window_index`); recall search scores the message by its best window.
-- Existing embeddings become window 0 of their message. The usearch recall index keys vectors
-- by message and window from now on and is rebuilt on first use.

CREATE TABLE message_embeddings_v4 (
    seq          INTEGER PRIMARY KEY,
    message_seq  INTEGER NOT NULL,
    window_index INTEGER NOT NULL DEFAULT 0,
    agent_id     BLOB NOT NULL,
    embedding    BLOB NOT NULL,         -- little-endian f32 of the store's embedding dimension
    UNIQUE (message_seq, window_index)
) STRICT;
INSERT INTO message_embeddings_v4 (seq, message_seq, window_index, agent_id, embedding)
    SELECT seq, message_seq, 0, agent_id, embedding FROM message_embeddings;
DROP TABLE message_embeddings;
ALTER TABLE message_embeddings_v4 RENAME TO message_embeddings;
CREATE INDEX message_embeddings_by_agent ON message_embeddings (agent_id, seq);
