-- Drills: a real drill of losing a DC, a cluster or the clusters of a
-- label selector (docs/drills.md). id is the drill's name in the API and
-- the CLI (purser drill get ID). target_kind/target_name is what is
-- taken away; force says the drill was started although the what-if's
-- verdict was not Absorbed; actor is the admin who started it, the actor
-- of every audit entry of the drill. state is Running while moves are
-- under way (the drill follower's work), then Ended or Failed; ended_at
-- is when it left Running. planned is the what-if's report at start
-- (JSON of v1alpha1.DrillReport), kept as it was so that the report
-- compares it with what happened; actual is the follower's record (JSON
-- of the per-runnable outcomes, the clusters cordoned, the end).
-- move_back says the drill's end asked the moved work to go back.

-- +goose Up
CREATE TABLE drills (
    id               BIGSERIAL   PRIMARY KEY,
    target_kind      TEXT        NOT NULL,
    target_name      TEXT        NOT NULL,
    force            BOOLEAN     NOT NULL,
    actor            TEXT        NOT NULL,
    state            TEXT        NOT NULL,
    started_at       TIMESTAMPTZ NOT NULL,
    ended_at         TIMESTAMPTZ,
    planned          TEXT        NOT NULL,
    actual           TEXT        NOT NULL DEFAULT '',
    move_back        BOOLEAN     NOT NULL DEFAULT FALSE,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL
);
-- One drill runs at a time: two starts at once cannot both pass the
-- API's check, and the follower reads the drill under way by it.
CREATE UNIQUE INDEX drills_running ON drills (state) WHERE state = 'Running';

-- +goose Down
DROP TABLE drills;
