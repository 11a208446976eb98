-- What is left to remove of an attempt that ended while its object may
-- still be on its cluster: an evicted attempt, or one given up because
-- its cluster could not be reached. The controller removes such objects
-- once it can (the cluster is back, or the next attempt is healthy) and
-- then marks the attempt Done, so a cluster returning after a partition
-- never keeps running a copy that was moved away.
--   cleanup:       '' (nothing to do) | Pending | Done
--   cleanup_after: Pending only: not before this time (Gracefully waits
--                  for the next attempt to be healthy or this deadline)

-- +goose Up
ALTER TABLE attempts ADD COLUMN cleanup TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN cleanup_after TIMESTAMPTZ;
CREATE INDEX attempts_cleanup ON attempts (cleanup) WHERE cleanup = 'Pending';

-- +goose Down
DROP INDEX attempts_cleanup;
ALTER TABLE attempts DROP COLUMN cleanup_after;
ALTER TABLE attempts DROP COLUMN cleanup;
