-- Ended runnables can be removed (by a user, or by retention once
-- spec.ttlSecondsAfterFinished has passed), and what their attempts left
-- on member clusters goes with them.
--   runnables.ended_at:     when the runnable reached an ended phase
--   runnables.remove_after: when retention removes it (NULL: never)
--   leftover_copies:        objects of removed runnables still to delete
--                           from their clusters; the attempts that named
--                           them went with the runnable's row

-- +goose Up
ALTER TABLE runnables ADD COLUMN ended_at TEXT;
ALTER TABLE runnables ADD COLUMN remove_after TEXT;
CREATE INDEX runnables_remove_after ON runnables (remove_after) WHERE remove_after IS NOT NULL;
CREATE TABLE leftover_copies (
    runnable_uid TEXT        NOT NULL,
    attempt      INTEGER     NOT NULL,
    cluster      TEXT        NOT NULL,
    api_version  TEXT        NOT NULL,
    kind         TEXT        NOT NULL,
    namespace    TEXT        NOT NULL,
    name         TEXT        NOT NULL,
    runnable     TEXT        NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (runnable_uid, attempt)
) STRICT;

-- +goose Down
DROP TABLE leftover_copies;
DROP INDEX runnables_remove_after;
ALTER TABLE runnables DROP COLUMN remove_after;
ALTER TABLE runnables DROP COLUMN ended_at;
