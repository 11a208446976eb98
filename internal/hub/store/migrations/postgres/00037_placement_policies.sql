-- Placement policies: what purser makes of the native objects written to
-- its Kubernetes API. A namespace's policy has its namespace; the farm's
-- (ClusterPlacementPolicy) has namespace ''. The policies of a namespace
-- and the farm's are read together at each write of a native object.

-- +goose Up
CREATE TABLE placement_policies (
    uid              TEXT        PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    spec             TEXT        NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL,
    UNIQUE (namespace, name)
);

-- +goose Down
DROP TABLE placement_policies;
