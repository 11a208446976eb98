-- Schedules: a runnable template started at each tick of a cron
-- expression (spec: JSON of a Document of v1alpha1.ScheduleSpec, with its
-- author, whose rights each tick is checked against again; status: JSON
-- of v1alpha1.ScheduleStatus). next_tick is when the scheduler must look
-- at the schedule again (NULL: suspended, or a cron that never fires), so
-- that it sleeps until the earliest one rather than polling. Each tick's
-- runnable is named after the tick: the unique (namespace, name) of the
-- runnables table is what keeps a tick from running twice.

-- +goose Up
CREATE TABLE schedules (
    uid              TEXT        PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    spec             TEXT        NOT NULL,
    status           TEXT        NOT NULL DEFAULT '',
    next_tick        TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL,
    UNIQUE (namespace, name)
);
CREATE INDEX schedules_next_tick ON schedules (next_tick) WHERE next_tick IS NOT NULL;

-- +goose Down
DROP TABLE schedules;
