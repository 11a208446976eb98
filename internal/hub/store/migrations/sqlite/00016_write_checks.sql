-- Each process's latest check that the database takes its commits; see
-- the PostgreSQL half.

-- +goose Up
CREATE TABLE write_checks (
    name       TEXT PRIMARY KEY,
    checked_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE write_checks;
