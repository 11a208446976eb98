-- Rollouts of deployables in waves.
--   previous_*: the generation the clusters a rollout has not reached keep
--     (and a rollback returns to): spec as the deployables table stores it,
--     secret sealed as ever; previous_generation 0 means none.
--   status: JSON of the syncer's latest decision (v1alpha1.RolloutStatus
--     and the resumes it acted on); control: JSON of what people set
--     (pause, resume, rollback, approved waves) for one generation.
-- deployable_status.state_generation: the generation a status row's state
-- is about (the one last attempted), so that an Error of an older
-- generation is not taken for the new one's.

-- +goose Up
CREATE TABLE deployable_rollouts (
    deployable_uid      TEXT   PRIMARY KEY REFERENCES deployables (uid) ON DELETE CASCADE,
    previous_generation BIGINT NOT NULL,
    previous_spec       TEXT,
    previous_secret     BYTEA,
    previous_spec_hash  TEXT   NOT NULL,
    status              TEXT,
    control             TEXT,
    resource_version    BIGINT NOT NULL
);
ALTER TABLE deployable_status ADD COLUMN state_generation BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE deployable_status DROP COLUMN state_generation;
DROP TABLE deployable_rollouts;
