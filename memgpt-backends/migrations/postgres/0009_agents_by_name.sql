-- Agents by name (version 9): a server checks a new name against these rows instead of
-- reading every agent's state.
CREATE INDEX agents_by_name ON agents (name);
