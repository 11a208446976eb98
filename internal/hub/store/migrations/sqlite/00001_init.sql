-- The SQLite half of purser's schema. migrations/postgres holds the same
-- logical schema; keep the two in step, one migration number per change.
--
-- Conventions forced by SQLite: timestamps are TEXT in the fixed-width UTC
-- form 2006-01-02T15:04:05.000000Z, which sorts like the instants it names;
-- booleans are INTEGER 0/1; STRICT tables reject a value of the wrong type
-- instead of silently storing it. AUTOINCREMENT keeps ids from being reused
-- after deletes, as PostgreSQL sequences do.

-- +goose Up
CREATE TABLE runnables (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    uid              TEXT    NOT NULL UNIQUE,
    generation       INTEGER NOT NULL,
    spec             TEXT    NOT NULL,
    spec_hash        TEXT    NOT NULL,
    phase            TEXT    NOT NULL,
    cluster          TEXT    NOT NULL,
    submitter        TEXT    NOT NULL,
    status           TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    UNIQUE (namespace, name)
) STRICT;
CREATE INDEX runnables_phase ON runnables (phase, namespace, name);
CREATE INDEX runnables_cluster ON runnables (cluster, namespace, name);

CREATE TABLE attempts (
    runnable_uid TEXT    NOT NULL REFERENCES runnables (uid) ON DELETE CASCADE,
    number       INTEGER NOT NULL,
    cluster      TEXT    NOT NULL,
    object_uid   TEXT    NOT NULL,
    started_at   TEXT    NOT NULL,
    ended_at     TEXT,
    result       TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    message      TEXT    NOT NULL,
    PRIMARY KEY (runnable_uid, number)
) STRICT;

CREATE TABLE clusters (
    name             TEXT    PRIMARY KEY,
    labels           TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    kubeconfig       BLOB,
    status           TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL
) STRICT;

CREATE TABLE deployables (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    uid              TEXT    NOT NULL UNIQUE,
    generation       INTEGER NOT NULL,
    spec             TEXT    NOT NULL,
    secret           BLOB,
    spec_hash        TEXT    NOT NULL,
    pending          TEXT,
    pending_secret   BLOB,
    pending_by       TEXT    NOT NULL,
    pending_delete   INTEGER NOT NULL,
    deleted_at       TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    UNIQUE (namespace, name)
) STRICT;

-- A status row only means something while both its deployable and its
-- cluster exist, hence the two cascades.
CREATE TABLE deployable_status (
    deployable_uid    TEXT    NOT NULL REFERENCES deployables (uid) ON DELETE CASCADE,
    cluster           TEXT    NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,
    state             TEXT    NOT NULL,
    synced_generation INTEGER NOT NULL,
    last_synced_at    TEXT,
    message           TEXT    NOT NULL,
    PRIMARY KEY (deployable_uid, cluster)
) STRICT;
CREATE INDEX deployable_status_cluster ON deployable_status (cluster);

-- Deliberately no foreign key to clusters: the ingester may see events of a
-- cluster that is being registered or removed, and a cluster's removal must
-- not turn into one huge cascading delete.
CREATE TABLE inventory (
    cluster          TEXT NOT NULL,
    api_version      TEXT NOT NULL,
    kind             TEXT NOT NULL,
    namespace        TEXT NOT NULL,
    name             TEXT NOT NULL,
    uid              TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    labels           TEXT NOT NULL,
    health           TEXT NOT NULL,
    phase            TEXT NOT NULL,
    observed_at      TEXT NOT NULL,
    object           TEXT,
    PRIMARY KEY (cluster, uid)
) STRICT;
CREATE INDEX inventory_kind_namespace_name ON inventory (kind, namespace, name);

-- seq is assigned by AppendAudit from audit_head, not by an autoincrement,
-- because the chain needs gap-free numbers that only committed entries use.
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY,
    logged_at TEXT    NOT NULL,
    actor     TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    namespace TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    summary   TEXT    NOT NULL,
    outcome   TEXT    NOT NULL,
    details   TEXT,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL
) STRICT;
CREATE INDEX audit_log_object ON audit_log (namespace, kind, name, seq);
CREATE INDEX audit_log_actor ON audit_log (actor, seq);
CREATE INDEX audit_log_logged_at ON audit_log (logged_at);

-- The single row that serializes appends to the chain and records its tip,
-- which also lets VerifyAudit notice entries cut off the end of the log.
CREATE TABLE audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq  INTEGER NOT NULL,
    last_hash TEXT    NOT NULL
) STRICT;
INSERT INTO audit_head (id, last_seq, last_hash) VALUES (1, 0, '');

CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    subject    TEXT    NOT NULL,
    msg_id     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    created_at TEXT    NOT NULL
) STRICT;

-- +goose Down
DROP TABLE outbox;
DROP TABLE audit_head;
DROP TABLE audit_log;
DROP TABLE inventory;
DROP TABLE deployable_status;
DROP TABLE deployables;
DROP TABLE clusters;
DROP TABLE attempts;
DROP TABLE runnables;
