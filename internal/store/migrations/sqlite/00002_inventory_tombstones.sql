-- Tombstones of deleted inventory records; see the PostgreSQL half for why.

-- +goose Up
CREATE TABLE inventory_tombstones (
    cluster          TEXT NOT NULL,
    uid              TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    deleted_at       TEXT NOT NULL,
    PRIMARY KEY (cluster, uid)
) STRICT;
CREATE INDEX inventory_tombstones_deleted_at ON inventory_tombstones (deleted_at);
-- Snapshot reconciliation reads every record of one cluster and kind.
CREATE INDEX inventory_cluster_kind ON inventory (cluster, kind, api_version);

-- +goose Down
DROP INDEX inventory_cluster_kind;
DROP TABLE inventory_tombstones;
