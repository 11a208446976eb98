-- When purser last heard from each cluster's agent; see the PostgreSQL half.

-- +goose Up
CREATE TABLE cluster_agents (
    cluster        TEXT PRIMARY KEY,
    last_heartbeat TEXT,
    last_snapshot  TEXT,
    last_event     TEXT
) STRICT;

-- +goose Down
DROP TABLE cluster_agents;
