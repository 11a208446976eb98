-- The kinds each member cluster serves and their scope; see the
-- PostgreSQL half.

-- +goose Up
CREATE TABLE cluster_kinds (
    cluster     TEXT    NOT NULL,
    api_group   TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    namespaced  INTEGER NOT NULL,
    observed_at TEXT    NOT NULL,
    PRIMARY KEY (cluster, api_group, kind)
) STRICT;
CREATE INDEX cluster_kinds_by_kind ON cluster_kinds (api_group, kind);

-- +goose Down
DROP TABLE cluster_kinds;
