-- Rollouts of deployables in waves; see the PostgreSQL half.

-- +goose Up
CREATE TABLE deployable_rollouts (
    deployable_uid      TEXT    PRIMARY KEY REFERENCES deployables (uid) ON DELETE CASCADE,
    previous_generation INTEGER NOT NULL,
    previous_spec       TEXT,
    previous_secret     BLOB,
    previous_spec_hash  TEXT    NOT NULL,
    status              TEXT,
    control             TEXT,
    resource_version    INTEGER NOT NULL
) STRICT;
ALTER TABLE deployable_status ADD COLUMN state_generation INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE deployable_status DROP COLUMN state_generation;
DROP TABLE deployable_rollouts;
