-- The inventory's change sequence; see the PostgreSQL half.

-- +goose Up
CREATE TABLE inventory_feed (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       INTEGER NOT NULL,
    pruned_to INTEGER NOT NULL
);
INSERT INTO inventory_feed (id, seq, pruned_to) VALUES (1, 0, 0);
ALTER TABLE inventory ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inventory ADD COLUMN created_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX inventory_seq ON inventory (seq);
CREATE TABLE inventory_deletions (
    seq              INTEGER PRIMARY KEY,
    cluster          TEXT NOT NULL,
    api_version      TEXT NOT NULL,
    kind             TEXT NOT NULL,
    namespace        TEXT NOT NULL,
    name             TEXT NOT NULL,
    uid              TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    labels           TEXT NOT NULL,
    object           TEXT,
    deleted_at       TEXT NOT NULL
);
CREATE INDEX inventory_deletions_deleted_at ON inventory_deletions (deleted_at);

-- +goose Down
DROP TABLE inventory_deletions;
DROP INDEX inventory_seq;
ALTER TABLE inventory DROP COLUMN created_seq;
ALTER TABLE inventory DROP COLUMN seq;
DROP TABLE inventory_feed;
