-- Sequence numbers are never given twice (version 12).
--
-- The derived indexes (tantivy, usearch) remember the highest `seq` they applied and index the
-- rows after it. A plain INTEGER PRIMARY KEY gives the largest rowid plus one, so deleting the
-- newest rows (an agent, the newest passage) made SQLite give their numbers again, to rows an
-- index then took for seen and never indexed. With AUTOINCREMENT a number is never reused
-- (`sqlite_sequence` keeps the highest one given). The four tables are rebuilt with the same
-- columns, rows and indexes, and the generation moves so that every tantivy index built from
-- the old numbering is rebuilt (usearch sidecars written before this version are rebuilt too).

CREATE TABLE messages_v12 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              BLOB NOT NULL UNIQUE,
    agent_id        BLOB NOT NULL,
    kind            TEXT NOT NULL,
    text            TEXT NOT NULL,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    name            TEXT,
    created_at      INTEGER NOT NULL,
    turn            INTEGER,
    document        TEXT NOT NULL DEFAULT '',
    document_length INTEGER NOT NULL DEFAULT 0,
    embedded        INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO messages_v12 (seq, id, agent_id, kind, text, tool_calls, tool_call_id, name,
                          created_at, turn, document, document_length, embedded)
    SELECT seq, id, agent_id, kind, text, tool_calls, tool_call_id, name,
           created_at, turn, document, document_length, embedded
    FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v12 RENAME TO messages;
CREATE INDEX messages_by_agent_time ON messages (agent_id, created_at, seq);
CREATE INDEX messages_by_agent_kind ON messages (agent_id, kind, created_at, seq);
CREATE INDEX messages_by_agent_turn ON messages (agent_id, turn) WHERE turn IS NOT NULL;
CREATE INDEX messages_unembedded ON messages (agent_id, seq) WHERE turn IS NOT NULL AND embedded = 0;

CREATE TABLE passages_v12 (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             BLOB NOT NULL UNIQUE,
    agent_id       BLOB NOT NULL,
    text           TEXT NOT NULL,
    embedding      BLOB,
    metadata       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    valid_from     INTEGER,
    valid_to       INTEGER,
    superseded_by  BLOB,
    retired_reason TEXT
) STRICT;
INSERT INTO passages_v12 (seq, id, agent_id, text, embedding, metadata, created_at,
                          valid_from, valid_to, superseded_by, retired_reason)
    SELECT seq, id, agent_id, text, embedding, metadata, created_at,
           valid_from, valid_to, superseded_by, retired_reason
    FROM passages;
DROP TABLE passages;
ALTER TABLE passages_v12 RENAME TO passages;
CREATE INDEX passages_by_agent ON passages (agent_id, seq);
CREATE INDEX passages_embedded ON passages (agent_id, seq) WHERE embedding IS NOT NULL;
CREATE INDEX passages_by_agent_time ON passages (agent_id, created_at);
CREATE INDEX passages_with_lifetime ON passages (agent_id)
    WHERE valid_from IS NOT NULL OR valid_to IS NOT NULL;
CREATE INDEX passages_unembedded ON passages (agent_id, seq) WHERE embedding IS NULL;

CREATE TABLE passage_deletions_v12 (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    passage_seq INTEGER NOT NULL,
    agent_id    BLOB NOT NULL
) STRICT;
INSERT INTO passage_deletions_v12 (seq, passage_seq, agent_id)
    SELECT seq, passage_seq, agent_id FROM passage_deletions;
DROP TABLE passage_deletions;
ALTER TABLE passage_deletions_v12 RENAME TO passage_deletions;

CREATE TABLE message_embeddings_v12 (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    message_seq  INTEGER NOT NULL,
    window_index INTEGER NOT NULL DEFAULT 0,
    agent_id     BLOB NOT NULL,
    embedding    BLOB NOT NULL,
    UNIQUE (message_seq, window_index)
) STRICT;
INSERT INTO message_embeddings_v12 (seq, message_seq, window_index, agent_id, embedding)
    SELECT seq, message_seq, window_index, agent_id, embedding FROM message_embeddings;
DROP TABLE message_embeddings;
ALTER TABLE message_embeddings_v12 RENAME TO message_embeddings;
CREATE INDEX message_embeddings_by_agent ON message_embeddings (agent_id, seq);

UPDATE memgpt_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation';
