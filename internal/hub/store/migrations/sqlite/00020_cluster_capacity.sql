-- What each cluster's agent last said it has free; see the PostgreSQL half.

-- +goose Up
ALTER TABLE cluster_agents ADD COLUMN capacity TEXT;
ALTER TABLE cluster_agents ADD COLUMN capacity_at TEXT;

-- +goose Down
ALTER TABLE cluster_agents DROP COLUMN capacity_at;
ALTER TABLE cluster_agents DROP COLUMN capacity;
