-- The FIFO queue as rows (version 8).
--
-- An agent's queued message ids were part of its state's JSON, rewritten by every commit: the
-- longer the queue, the more each step wrote. Each queued message is now a row, and a commit
-- deletes the rows of the messages it evicted and inserts those it queued. `position` orders
-- the queue (it only grows within an agent; gaps are fine).

CREATE TABLE agent_queue (
    agent_id   BLOB NOT NULL,
    position   INTEGER NOT NULL,
    message_id BLOB NOT NULL,
    PRIMARY KEY (agent_id, position)
) STRICT, WITHOUT ROWID;
CREATE INDEX agent_queue_by_message ON agent_queue (agent_id, message_id);

-- The queues the states held (uuids were JSON text; sqlx binds them as 16-byte blobs).
INSERT INTO agent_queue (agent_id, position, message_id)
SELECT a.id, q.key + 1, unhex(replace(q.value, '-', ''))
FROM agents AS a, json_each(a.state, '$.fifo') AS q;
UPDATE agents SET state = json_remove(state, '$.fifo');
