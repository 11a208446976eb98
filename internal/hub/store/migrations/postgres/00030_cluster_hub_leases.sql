-- The hub's lease in each member cluster (a coordination.k8s.io/v1 Lease
-- named purser-hub that the controllers' observers renew and the
-- cluster's agent reads): lands_by is the latest time a renewal already
-- issued can still land, on the database's clock, written BEFORE the
-- renewal is sent. The agent does not fence while it sees renewals; the
-- failover controller therefore counts an AtMostOne runnable's wait from
-- the later of this and the agent's last heartbeat, so that a renewal
-- whose answer was lost still counts. Observations, not changes: not
-- audited, like cluster_views.

-- +goose Up
CREATE TABLE cluster_hub_leases (
    cluster  TEXT        PRIMARY KEY,
    lands_by TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE cluster_hub_leases;
