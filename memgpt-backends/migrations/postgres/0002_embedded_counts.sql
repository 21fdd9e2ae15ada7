-- How many embedded passages each agent has, kept by the commit transaction: counting them
-- with `embedding IS NOT NULL` would read every (inline, ~1.5 KB) vector.
CREATE TABLE agent_embedded_counts (
    agent_id uuid PRIMARY KEY,
    embedded bigint NOT NULL
);
INSERT INTO agent_embedded_counts (agent_id, embedded)
    SELECT agent_id, count(*) FROM passages WHERE embedding IS NOT NULL GROUP BY agent_id;
