-- memgpt-rs SQLite schema, version 1.
-- Times are microseconds since the Unix epoch (UTC); ids are 16-byte UUIDs.

CREATE TABLE memgpt_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- Bumped whenever rows are removed other than through passage deletions (agent deletion), so
-- derived indexes (tantivy, usearch) know to rebuild.
INSERT INTO memgpt_meta (key, value) VALUES ('generation', '0');

CREATE TABLE agents (
    id         BLOB PRIMARY KEY,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    state      TEXT NOT NULL,          -- AgentState as JSON
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- Recall storage: every message, append-only. `seq` is the global append order, which derived
-- indexes use as their watermark.
CREATE TABLE messages (
    seq          INTEGER PRIMARY KEY,
    id           BLOB NOT NULL UNIQUE,
    agent_id     BLOB NOT NULL,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    tool_calls   TEXT,                 -- JSON array, NULL when none
    tool_call_id TEXT,
    name         TEXT,
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_by_agent_time ON messages (agent_id, created_at, seq);
CREATE INDEX messages_by_agent_kind ON messages (agent_id, kind, created_at, seq);

-- Full-text index of messages (rowid = messages.seq). `agent` holds the agent id in hex so a
-- query can be restricted to one agent inside the index.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    agent, body,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Archival storage.
CREATE TABLE passages (
    seq        INTEGER PRIMARY KEY,
    id         BLOB NOT NULL UNIQUE,
    agent_id   BLOB NOT NULL,
    text       TEXT NOT NULL,
    embedding  BLOB,                   -- little-endian f32 of the store's embedding dimension
    metadata   TEXT NOT NULL,          -- JSON object
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX passages_by_agent ON passages (agent_id, seq);

CREATE VIRTUAL TABLE passages_fts USING fts5 (
    agent, body,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Every passage deletion, in order: lets a vector index that was saved before a deletion
-- replay it on open.
CREATE TABLE passage_deletions (
    seq         INTEGER PRIMARY KEY,
    passage_seq INTEGER NOT NULL,
    agent_id    BLOB NOT NULL
) STRICT;
