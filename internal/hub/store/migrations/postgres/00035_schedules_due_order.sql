-- The schedules due at a tick are read in pages by (next_tick, namespace,
-- name): a page's runnables then fall in one stretch of the name indexes
-- of runnables and of the audit log, rather than all over them. This
-- index gives each page its rows in that order without sorting every
-- schedule due, and serves MIN(next_tick) as the one it replaces did.

-- +goose Up
CREATE INDEX schedules_due ON schedules (next_tick, namespace, name) WHERE next_tick IS NOT NULL;
DROP INDEX schedules_next_tick;

-- +goose Down
CREATE INDEX schedules_next_tick ON schedules (next_tick) WHERE next_tick IS NOT NULL;
DROP INDEX schedules_due;
