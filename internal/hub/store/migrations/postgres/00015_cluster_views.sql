-- What each DC's controller saw of each cluster at its latest probe: the
-- leader judges a cluster by a quorum of these views (internal/clusters),
-- so that a partition of one DC does not look like the clusters beyond it
-- being down. observer names the DC (the controller's --dc; '' without
-- one). observed_at is written by the database's clock; failing_since is
-- when the observer's current run of failed probes began, on the same
-- clock. Observations, not changes: not audited, like cluster_agents.

-- +goose Up
CREATE TABLE cluster_views (
    cluster       TEXT        NOT NULL,
    observer      TEXT        NOT NULL,
    outcome       TEXT        NOT NULL,
    detail        TEXT        NOT NULL,
    observed_at   TIMESTAMPTZ NOT NULL,
    failing_since TIMESTAMPTZ,
    PRIMARY KEY (cluster, observer)
);

-- +goose Down
DROP TABLE cluster_views;
