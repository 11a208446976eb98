-- What each DC's controller saw of each cluster; see the PostgreSQL half.

-- +goose Up
CREATE TABLE cluster_views (
    cluster       TEXT NOT NULL,
    observer      TEXT NOT NULL,
    outcome       TEXT NOT NULL,
    detail        TEXT NOT NULL,
    observed_at   TEXT NOT NULL,
    failing_since TEXT,
    PRIMARY KEY (cluster, observer)
) STRICT;

-- +goose Down
DROP TABLE cluster_views;
