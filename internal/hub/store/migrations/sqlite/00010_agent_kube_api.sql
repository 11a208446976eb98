-- What each cluster's agent said of its own kube-apiserver; see the
-- PostgreSQL half.

-- +goose Up
ALTER TABLE cluster_agents ADD COLUMN kube_api TEXT;
ALTER TABLE cluster_agents ADD COLUMN current_until TEXT;

-- +goose Down
ALTER TABLE cluster_agents DROP COLUMN current_until;
ALTER TABLE cluster_agents DROP COLUMN kube_api;
