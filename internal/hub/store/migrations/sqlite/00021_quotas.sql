-- Each namespace's quota; see the PostgreSQL half.

-- +goose Up
CREATE TABLE quotas (
    namespace        TEXT    PRIMARY KEY,
    spec             TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE quotas;
