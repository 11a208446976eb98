-- Triggers; see the PostgreSQL half.

-- +goose Up
CREATE TABLE triggers (
    uid              TEXT    PRIMARY KEY,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT '',
    token_hash       TEXT    NOT NULL DEFAULT '',
    watermark        TEXT    NOT NULL,
    seen             TEXT    NOT NULL DEFAULT '',
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    UNIQUE (namespace, name)
) STRICT;
CREATE INDEX runnables_namespace_ended ON runnables (namespace, ended_at) WHERE ended_at IS NOT NULL;

-- +goose Down
DROP INDEX runnables_namespace_ended;
DROP TABLE triggers;
