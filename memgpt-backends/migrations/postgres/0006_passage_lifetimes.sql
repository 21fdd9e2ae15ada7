-- Facts with a lifetime (version 6).
--
-- A passage is a fact that holds from `valid_from` (NULL: from `created_at`) until `valid_to`
-- (NULL: until retired). Updating a fact stores a new passage and retires the old one
-- (`valid_to`, `superseded_by`, `retired_reason`); forgetting retires it with a reason; a time
-- to live sets `valid_to` when the passage is stored. Searches see the facts valid at an
-- instant (now by default); the rows stay, as the history of what was once true.

ALTER TABLE passages ADD COLUMN valid_from timestamptz;
ALTER TABLE passages ADD COLUMN valid_to timestamptz;
ALTER TABLE passages ADD COLUMN superseded_by uuid;
ALTER TABLE passages ADD COLUMN retired_reason text;

-- The agents whose passages have lifetimes: only their searches check validity row by row.
CREATE INDEX passages_with_lifetime ON passages (agent_id)
    WHERE valid_from IS NOT NULL OR valid_to IS NOT NULL;
