-- What each cluster's agent said of its own kube-apiserver in its latest
-- heartbeat (kube_api: JSON {"connected", "synced", "lastContact",
-- "error"}; NULL for agents that do not say), and the time of the latest
-- heartbeat in which its caches were synced and connected
-- (current_until). A snapshot or a heartbeat from an agent whose caches
-- can no longer be refreshed must not make the cluster's records look
-- current; these are what the API's freshness rule reads.

-- +goose Up
ALTER TABLE cluster_agents ADD COLUMN kube_api TEXT;
ALTER TABLE cluster_agents ADD COLUMN current_until TIMESTAMPTZ;

-- +goose Down
ALTER TABLE cluster_agents DROP COLUMN current_until;
ALTER TABLE cluster_agents DROP COLUMN kube_api;
