-- The generations a rollout keeps beside the live spec and the previous
-- one: each generation that a cluster holds, or falls back to, under the
-- syncer's latest decision (a generation superseded mid-rollout stays on
-- the clusters it had reached until their wave gives them the new one).
-- JSON list of {generation, spec, secret, specHash}: spec as the
-- deployables table stores it, secret sealed as ever (base64). The syncer
-- drops a generation when no decision names it any more.

-- +goose Up
ALTER TABLE deployable_rollouts ADD COLUMN kept TEXT;

-- +goose Down
ALTER TABLE deployable_rollouts DROP COLUMN kept;
