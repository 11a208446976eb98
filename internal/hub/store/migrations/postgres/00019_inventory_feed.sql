-- The inventory's change sequence: one number, global to every cluster,
-- that orders every change of the inventory as it committed, so that a
-- watch (the Kubernetes-shaped read API, /k8s) resumes from a list or an
-- event without missing or repeating a change, whatever the rates at
-- which clusters advance.
--   inventory_feed.seq: the last number handed out. Writers bump it
--     first in their transaction, taking its row lock until they commit,
--     so numbers commit in order: a reader that sees N has seen every
--     change below it.
--   inventory_feed.pruned_to: every deletion at or below it has been
--     forgotten; a watch from below it is answered 410 Gone.
--   inventory.seq: the number of the record's last change;
--     inventory.created_seq: of its first (ADDED rather than MODIFIED).
--   inventory_deletions: the records removed, with their last state, by
--     the number of their removal; pruned with the tombstones.

-- +goose Up
CREATE TABLE inventory_feed (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       BIGINT  NOT NULL,
    pruned_to BIGINT  NOT NULL
);
INSERT INTO inventory_feed (id, seq, pruned_to) VALUES (1, 0, 0);
ALTER TABLE inventory ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inventory ADD COLUMN created_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX inventory_seq ON inventory (seq);
CREATE TABLE inventory_deletions (
    seq              BIGINT      PRIMARY KEY,
    cluster          TEXT        NOT NULL,
    api_version      TEXT        NOT NULL,
    kind             TEXT        NOT NULL,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    uid              TEXT        NOT NULL,
    resource_version TEXT        NOT NULL,
    labels           TEXT        NOT NULL,
    object           TEXT,
    deleted_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX inventory_deletions_deleted_at ON inventory_deletions (deleted_at);

-- +goose Down
DROP TABLE inventory_deletions;
DROP INDEX inventory_seq;
ALTER TABLE inventory DROP COLUMN created_seq;
ALTER TABLE inventory DROP COLUMN seq;
DROP TABLE inventory_feed;
