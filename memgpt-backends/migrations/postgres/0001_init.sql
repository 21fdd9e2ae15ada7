-- memgpt-rs PostgreSQL schema, version 1. Needs the pgvector extension (`vector`).
-- Applied inside the store's schema (search_path = the schema, then pgvector's schema).

CREATE TABLE memgpt_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE agents (
    id         uuid PRIMARY KEY,
    -- Creation order, for listing agents created at the same instant.
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name       text NOT NULL,
    version    bigint NOT NULL,
    state      jsonb NOT NULL,          -- AgentState
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX agents_by_creation ON agents (created_at, seq);

-- Recall storage: every message, append-only; `seq` is the append order.
-- `search_text` is the message's searchable text (its text and the string arguments of its tool
-- calls) as the words of the reference tokenizer, lowercased and joined by spaces, so the
-- 'simple' configuration (no stemming, no stop words) sees exactly the words the reference
-- store matches: e-mail addresses, URLs, file names and decimals are split into words, not kept
-- whole as PostgreSQL's own parser would.
CREATE TABLE messages (
    seq          bigserial PRIMARY KEY,
    id           uuid NOT NULL UNIQUE,
    agent_id     uuid NOT NULL,
    kind         text NOT NULL,
    text         text NOT NULL,
    tool_calls   jsonb,                 -- array of ToolCall, NULL when none
    tool_call_id text,
    name         text,
    created_at   timestamptz NOT NULL,
    search_text  text NOT NULL,
    search       tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED
);
CREATE INDEX messages_by_agent_time ON messages (agent_id, created_at, seq);
CREATE INDEX messages_search ON messages USING gin (search);

-- Archival storage. `embedding` has no fixed dimension: the store's one embedding space (model
-- and dimension in memgpt_meta) is fixed by the first embedded passage, and the HNSW index over
-- `embedding::vector(D)` is created then.
CREATE TABLE passages (
    seq         bigserial PRIMARY KEY,
    id          uuid NOT NULL UNIQUE,
    agent_id    uuid NOT NULL,
    text        text NOT NULL,
    embedding   vector,
    metadata    jsonb NOT NULL,         -- JSON object
    created_at  timestamptz NOT NULL,
    search_text text NOT NULL,          -- as for messages
    search      tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED
);
CREATE INDEX passages_by_agent ON passages (agent_id, seq);
CREATE INDEX passages_search ON passages USING gin (search);
