-- Shared memory blocks (version 7).
--
-- A block attached to several agents lives here once; each agent's state holds a copy that it
-- refreshes before every step. An edit is one transaction on the row (locked with FOR UPDATE,
-- the version moves by one), applied to the current text, so concurrent edits from any
-- process are serialised and none is lost. `block` is the MemoryBlock as JSON (label, value,
-- limit, description, read_only).

CREATE TABLE shared_blocks (
    seq        bigserial UNIQUE,
    id         uuid PRIMARY KEY,
    block      jsonb NOT NULL,
    version    bigint NOT NULL,
    scope      text,                  -- the owner where one store serves several (a tenant)
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by uuid                   -- the agent of the last edit; NULL for a person
);
CREATE INDEX shared_blocks_by_scope ON shared_blocks (scope, created_at);

-- Which agents hold which shared block, written by the agents' commits.
CREATE TABLE block_attachments (
    block_id uuid NOT NULL REFERENCES shared_blocks (id),
    agent_id uuid NOT NULL,
    position integer NOT NULL,
    PRIMARY KEY (block_id, agent_id)
);
CREATE INDEX block_attachments_by_agent ON block_attachments (agent_id);
