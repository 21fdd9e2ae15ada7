-- Shared memory blocks (version 7).
--
-- A block attached to several agents lives here once; each agent's state holds a copy that it
-- refreshes before every step. An edit is one transaction on the row (the version moves by
-- one), applied to the current text, so concurrent edits are serialised and none is lost.
-- `block` is the MemoryBlock as JSON (label, value, limit, description, read_only).

CREATE TABLE shared_blocks (
    id         BLOB PRIMARY KEY,
    block      TEXT NOT NULL,
    version    INTEGER NOT NULL,
    scope      TEXT,                  -- the owner where one store serves several (a tenant)
    created_at INTEGER NOT NULL,      -- microseconds since the epoch
    updated_at INTEGER NOT NULL,
    updated_by BLOB                   -- the agent of the last edit; NULL for a person
) STRICT;
CREATE INDEX shared_blocks_by_scope ON shared_blocks (scope, created_at);

-- Which agents hold which shared block, written by the agents' commits.
CREATE TABLE block_attachments (
    block_id BLOB NOT NULL REFERENCES shared_blocks (id),
    agent_id BLOB NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (block_id, agent_id)
) STRICT;
CREATE INDEX block_attachments_by_agent ON block_attachments (agent_id);
