-- The PostgreSQL half of purser's schema. migrations/sqlite holds the same
-- logical schema; keep the two in step, one migration number per change.
--
-- JSON is stored as TEXT rather than JSONB on purpose: JSONB re-encodes the
-- document (key order, whitespace), and callers hash specs and audit details
-- byte for byte. BIGSERIAL rather than an identity column because on
-- CockroachDB it maps to unique_rowid(), which does not funnel every insert
-- through one sequence. Nothing here needs PostgreSQL-only features, so the
-- schema also runs on CockroachDB.

-- +goose Up
CREATE TABLE runnables (
    id               BIGSERIAL   PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    uid              TEXT        NOT NULL UNIQUE,
    generation       BIGINT      NOT NULL,
    spec             TEXT        NOT NULL,
    spec_hash        TEXT        NOT NULL,
    phase            TEXT        NOT NULL,
    cluster          TEXT        NOT NULL,
    submitter        TEXT        NOT NULL,
    status           TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL,
    UNIQUE (namespace, name)
);
CREATE INDEX runnables_phase ON runnables (phase, namespace, name);
CREATE INDEX runnables_cluster ON runnables (cluster, namespace, name);

CREATE TABLE attempts (
    runnable_uid TEXT        NOT NULL REFERENCES runnables (uid) ON DELETE CASCADE,
    number       BIGINT      NOT NULL,
    cluster      TEXT        NOT NULL,
    object_uid   TEXT        NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    ended_at     TIMESTAMPTZ,
    result       TEXT        NOT NULL,
    reason       TEXT        NOT NULL,
    message      TEXT        NOT NULL,
    PRIMARY KEY (runnable_uid, number)
);

CREATE TABLE clusters (
    name             TEXT        PRIMARY KEY,
    labels           TEXT        NOT NULL,
    spec             TEXT        NOT NULL,
    kubeconfig       BYTEA,
    status           TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL
);

CREATE TABLE deployables (
    id               BIGSERIAL   PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    uid              TEXT        NOT NULL UNIQUE,
    generation       BIGINT      NOT NULL,
    spec             TEXT        NOT NULL,
    secret           BYTEA,
    spec_hash        TEXT        NOT NULL,
    pending          TEXT,
    pending_secret   BYTEA,
    pending_by       TEXT        NOT NULL,
    pending_delete   BOOLEAN     NOT NULL,
    deleted_at       TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL,
    UNIQUE (namespace, name)
);

-- A status row only means something while both its deployable and its
-- cluster exist, hence the two cascades.
CREATE TABLE deployable_status (
    deployable_uid    TEXT        NOT NULL REFERENCES deployables (uid) ON DELETE CASCADE,
    cluster           TEXT        NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,
    state             TEXT        NOT NULL,
    synced_generation BIGINT      NOT NULL,
    last_synced_at    TIMESTAMPTZ,
    message           TEXT        NOT NULL,
    PRIMARY KEY (deployable_uid, cluster)
);
CREATE INDEX deployable_status_cluster ON deployable_status (cluster);

-- Deliberately no foreign key to clusters: the ingester may see events of a
-- cluster that is being registered or removed, and a cluster's removal must
-- not turn into one huge cascading delete.
CREATE TABLE inventory (
    cluster          TEXT        NOT NULL,
    api_version      TEXT        NOT NULL,
    kind             TEXT        NOT NULL,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    uid              TEXT        NOT NULL,
    resource_version TEXT        NOT NULL,
    labels           TEXT        NOT NULL,
    health           TEXT        NOT NULL,
    phase            TEXT        NOT NULL,
    observed_at      TIMESTAMPTZ NOT NULL,
    object           TEXT,
    PRIMARY KEY (cluster, uid)
);
CREATE INDEX inventory_kind_namespace_name ON inventory (kind, namespace, name);

-- seq is assigned by AppendAudit from audit_head, not by a sequence, because
-- the chain needs gap-free numbers that only committed entries use.
CREATE TABLE audit_log (
    seq       BIGINT      PRIMARY KEY,
    logged_at TIMESTAMPTZ NOT NULL,
    actor     TEXT        NOT NULL,
    action    TEXT        NOT NULL,
    kind      TEXT        NOT NULL,
    namespace TEXT        NOT NULL,
    name      TEXT        NOT NULL,
    summary   TEXT        NOT NULL,
    outcome   TEXT        NOT NULL,
    details   TEXT,
    prev_hash TEXT        NOT NULL,
    hash      TEXT        NOT NULL
);
CREATE INDEX audit_log_object ON audit_log (namespace, kind, name, seq);
CREATE INDEX audit_log_actor ON audit_log (actor, seq);
CREATE INDEX audit_log_logged_at ON audit_log (logged_at);

-- The single row that serializes appends to the chain (SELECT ... FOR
-- UPDATE; a row lock works on CockroachDB, advisory locks do not) and records
-- its tip, which also lets VerifyAudit notice entries cut off the end.
CREATE TABLE audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq  BIGINT  NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_seq, last_hash) VALUES (1, 0, '');

CREATE TABLE outbox (
    id         BIGSERIAL   PRIMARY KEY,
    subject    TEXT        NOT NULL,
    msg_id     TEXT        NOT NULL,
    data       BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

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
