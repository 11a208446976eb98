-- Schedules; see the PostgreSQL half.

-- +goose Up
CREATE TABLE schedules (
    uid              TEXT    PRIMARY KEY,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT '',
    next_tick        TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    UNIQUE (namespace, name)
) STRICT;
CREATE INDEX schedules_next_tick ON schedules (next_tick) WHERE next_tick IS NOT NULL;

-- +goose Down
DROP TABLE schedules;
