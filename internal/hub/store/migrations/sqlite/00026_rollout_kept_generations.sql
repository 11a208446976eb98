-- The generations a rollout keeps; see the PostgreSQL half.

-- +goose Up
ALTER TABLE deployable_rollouts ADD COLUMN kept TEXT;

-- +goose Down
ALTER TABLE deployable_rollouts DROP COLUMN kept;
