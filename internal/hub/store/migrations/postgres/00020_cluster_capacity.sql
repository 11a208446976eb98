-- What each cluster's agent last said it has free (capacity: JSON of
-- stream.Capacity: allocatable of the nodes that take pods, free after
-- the requests of its non-terminal pods, the most free on one node), and
-- the time of the heartbeat that said it (capacity_at), so that the
-- submitter places by the figure and counts as in flight only what was
-- placed since. The aggregate alone: never one row per pod.

-- +goose Up
ALTER TABLE cluster_agents ADD COLUMN capacity TEXT;
ALTER TABLE cluster_agents ADD COLUMN capacity_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE cluster_agents DROP COLUMN capacity_at;
ALTER TABLE cluster_agents DROP COLUMN capacity;
