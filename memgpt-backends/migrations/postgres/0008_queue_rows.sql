-- The FIFO queue as rows (version 8).
--
-- An agent's queued message ids were part of its state's JSON, rewritten by every commit: the
-- longer the queue, the more each step wrote. Each queued message is now a row, and a commit
-- deletes the rows of the messages it evicted and inserts those it queued. `position` orders
-- the queue (it only grows within an agent; gaps are fine).

CREATE TABLE agent_queue (
    agent_id   uuid NOT NULL,
    position   bigint NOT NULL,
    message_id uuid NOT NULL,
    PRIMARY KEY (agent_id, position)
);
CREATE INDEX agent_queue_by_message ON agent_queue (agent_id, message_id);

INSERT INTO agent_queue (agent_id, position, message_id)
SELECT a.id, q.n, q.id::uuid
FROM agents AS a, jsonb_array_elements_text(a.state -> 'fifo') WITH ORDINALITY AS q (id, n);
UPDATE agents SET state = state - 'fifo' WHERE state ? 'fifo';
