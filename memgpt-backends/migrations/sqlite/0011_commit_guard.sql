-- The guard of a step's one-round-trip commit (version 11). The commit sends BEGIN, an insert
-- of whether the agent is still at the version and turn count it expects, its writes and
-- COMMIT as one statement list. The trigger ends the transaction when the check failed, so the
-- writes after it never run, and writes nothing when it passed: the table stays empty.
CREATE TABLE commit_guard (ok INTEGER NOT NULL);

CREATE TRIGGER commit_guard_check BEFORE INSERT ON commit_guard
BEGIN
    SELECT RAISE(ROLLBACK, 'memgpt: the agent changed since this store last committed it')
    WHERE NOT NEW.ok;
    SELECT RAISE(IGNORE);
END;
