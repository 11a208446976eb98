-- When purser last heard from each cluster's agent, written by the
-- ingester as it applies events and snapshots, so that every read of the
-- inventory can say how fresh each cluster's records are. A table of its
-- own rather than a field of clusters.status: the ingester touches it on
-- every batch, and must never contend with an admin's update of a cluster.
-- No foreign key: an agent may report before its cluster is registered.

-- +goose Up
CREATE TABLE cluster_agents (
    cluster        TEXT PRIMARY KEY,
    last_heartbeat TIMESTAMPTZ,
    last_snapshot  TIMESTAMPTZ,
    last_event     TIMESTAMPTZ
);

-- +goose Down
DROP TABLE cluster_agents;
