-- Tombstones of deleted inventory records. A uid is never reused by
-- Kubernetes, so an event for a tombstoned uid at or below the tombstone's
-- resourceVersion is a late or replayed one and must not bring the record
-- back. Rows are pruned by the ingester after a while (see
-- docs/inventory.md): by then no redelivery can still be in flight.

-- +goose Up
CREATE TABLE inventory_tombstones (
    cluster          TEXT        NOT NULL,
    uid              TEXT        NOT NULL,
    resource_version TEXT        NOT NULL,
    deleted_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, uid)
);
CREATE INDEX inventory_tombstones_deleted_at ON inventory_tombstones (deleted_at);

-- +goose Down
DROP TABLE inventory_tombstones;
