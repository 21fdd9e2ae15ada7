-- Long messages are embedded as several windows (version 4).
--
-- A conversation message longer than the embedder's window gets one embedding per window,
-- numbered from 0 (`window_index`); recall search scores the message by its best window.
-- Existing embeddings become window 0 of their message.

ALTER TABLE message_embeddings ADD COLUMN window_index integer NOT NULL DEFAULT 0;
ALTER TABLE message_embeddings DROP CONSTRAINT message_embeddings_message_seq_key;
ALTER TABLE message_embeddings ADD CONSTRAINT message_embeddings_message_window
    UNIQUE (message_seq, window_index);
