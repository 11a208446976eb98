-- The kinds each member cluster serves and their scope, as its agent's
-- discovery last reported them (stream.ServedKinds, written by the
-- ingester). The API reads a kind's scope here before it accepts an
-- object: a cluster-scoped kind needs a permission of the policy. No
-- foreign key, as for cluster_agents: an agent may report before its
-- cluster is registered; readers join clusters.

-- +goose Up
CREATE TABLE cluster_kinds (
    cluster     TEXT        NOT NULL,
    api_group   TEXT        NOT NULL,
    kind        TEXT        NOT NULL,
    version     TEXT        NOT NULL,
    namespaced  BOOLEAN     NOT NULL,
    observed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, api_group, kind)
);
CREATE INDEX cluster_kinds_by_kind ON cluster_kinds (api_group, kind);

-- +goose Down
DROP TABLE cluster_kinds;
