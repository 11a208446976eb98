-- Each process's latest check that the database takes its commits
-- (Store.CheckWrites): a primary cut off from its synchronous standby
-- still answers queries, but a commit there waits for the standby, so
-- only a write that commits proves the process is on the majority's side.

-- +goose Up
CREATE TABLE write_checks (
    name       TEXT        PRIMARY KEY,
    checked_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE write_checks;
