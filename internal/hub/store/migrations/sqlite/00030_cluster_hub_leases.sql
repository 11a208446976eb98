-- The hub's lease in each member cluster; see the PostgreSQL half.

-- +goose Up
CREATE TABLE cluster_hub_leases (
    cluster  TEXT PRIMARY KEY,
    lands_by TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE cluster_hub_leases;
