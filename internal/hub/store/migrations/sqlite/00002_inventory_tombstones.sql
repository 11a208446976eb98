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

-- +goose Down
DROP TABLE inventory_tombstones;
