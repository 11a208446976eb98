-- PostgreSQL's 00031 adds an index for a prefix of runnables' names
-- (a schedule's runs). SQLite needs none: names compare bytewise there,
-- and Runnables.ListByNamePrefix reads the prefix as a range of the
-- (namespace, name) index. The version is kept in step with PostgreSQL's.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
