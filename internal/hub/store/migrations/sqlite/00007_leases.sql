-- Leases elect one working replica among those of a component; see the
-- PostgreSQL half. The times are SQLite's own clock ('now'), written in the
-- schema's fixed-width form with the milliseconds SQLite keeps padded to
-- microseconds, so that they compare as text like every other timestamp.

-- +goose Up
CREATE TABLE leases (
    name        TEXT    PRIMARY KEY,
    holder      TEXT    NOT NULL,
    renewed_at  TEXT    NOT NULL,
    expires_at  TEXT    NOT NULL,
    transitions INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE leases;
