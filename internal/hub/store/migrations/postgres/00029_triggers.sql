-- Triggers: a runnable template started at each event of one source
-- (spec: JSON of a Document of v1alpha1.TriggerSpec, with its author,
-- whose rights each event's runnable is checked against again; status:
-- JSON of v1alpha1.TriggerStatus). token_hash is the SHA-256 (hex) of
-- the webhook's token, which is shown once and never stored. watermark
-- is the end time up to which the trigger loop has looked at the
-- namespace's ended runnables (it starts at the trigger's creation, so
-- that work ended before never fires it); seen holds, per deployable
-- uid, the generation up to which rollouts are dealt with. Each event's
-- runnable is named after the event: the unique (namespace, name) of the
-- runnables table is what keeps an event from running twice.

-- +goose Up
CREATE TABLE triggers (
    uid              TEXT        PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    spec             TEXT        NOT NULL,
    status           TEXT        NOT NULL DEFAULT '',
    token_hash       TEXT        NOT NULL DEFAULT '',
    watermark        TIMESTAMPTZ NOT NULL,
    seen             TEXT        NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL,
    UNIQUE (namespace, name)
);
-- The trigger loop reads a namespace's runnables that ended since a
-- watermark.
CREATE INDEX runnables_namespace_ended ON runnables (namespace, ended_at) WHERE ended_at IS NOT NULL;

-- +goose Down
DROP INDEX runnables_namespace_ended;
DROP TABLE triggers;
