-- Placement policies; see the PostgreSQL half.

-- +goose Up
CREATE TABLE placement_policies (
    uid              TEXT    PRIMARY KEY,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    UNIQUE (namespace, name)
) STRICT;

-- +goose Down
DROP TABLE placement_policies;
