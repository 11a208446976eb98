-- A schedule's runs are named after it ('<schedule>-<tick>'), and the
-- scheduler lists them at each tick by name LIKE '<schedule>-%'. Under a
-- collation other than C, PostgreSQL answers such a LIKE from an index
-- only when the index compares bytewise (text_pattern_ops); without this
-- one, each tick read every runnable of the schedule's namespace.

-- +goose Up
CREATE INDEX runnables_namespace_name_prefix ON runnables (namespace, name text_pattern_ops);

-- +goose Down
DROP INDEX runnables_namespace_name_prefix;
