-- Leases elect one working replica among those of a component (`purser
-- controller`): the row names its holder until expires_at. Both times are
-- written by the database's own clock (now()), and expiry is judged by the
-- same clock, so the replicas' clocks never enter into it; see
-- internal/lease. transitions counts the changes of holder.

-- +goose Up
CREATE TABLE leases (
    name        TEXT        PRIMARY KEY,
    holder      TEXT        NOT NULL,
    renewed_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    transitions BIGINT      NOT NULL
);

-- +goose Down
DROP TABLE leases;
