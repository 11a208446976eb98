-- Drills; see the PostgreSQL half.

-- +goose Up
CREATE TABLE drills (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    target_kind      TEXT    NOT NULL,
    target_name      TEXT    NOT NULL,
    force            INTEGER NOT NULL,
    actor            TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    started_at       TEXT    NOT NULL,
    ended_at         TEXT,
    planned          TEXT    NOT NULL,
    actual           TEXT    NOT NULL DEFAULT '',
    move_back        INTEGER NOT NULL DEFAULT 0,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX drills_running ON drills (state) WHERE state = 'Running';

-- +goose Down
DROP TABLE drills;
