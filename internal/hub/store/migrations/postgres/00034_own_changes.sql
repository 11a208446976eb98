-- The change sequence of purser's own kinds (runnables, deployables,
-- quotas), which /k8s watches read (store/own_changes.go). Triggers append
-- one row per write in the writer's own transaction, so that no write
-- path can forget it; the row's position (pos) is given after commit, in
-- an order no later commit can undercut: see OwnFeed.Number for why the
-- id, a number taken at insert, would let a watcher skip a row.
--
-- own_feed.seq starts at the highest resourceVersion the three tables
-- hold, and pruned_to with it: an object's own resourceVersion, which
-- client-go resumes a watch from, is then never above the position of its
-- last change, so a watch resumed from it misses nothing.

-- +goose Up
CREATE TABLE own_changes (
    id        BIGSERIAL PRIMARY KEY,
    pos       BIGINT UNIQUE,
    kind      TEXT        NOT NULL,
    namespace TEXT        NOT NULL,
    name      TEXT        NOT NULL,
    uid       TEXT        NOT NULL,
    type      TEXT        NOT NULL,
    at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX own_changes_unnumbered ON own_changes (id) WHERE pos IS NULL;
CREATE INDEX own_changes_at ON own_changes (at) WHERE pos IS NOT NULL;

CREATE TABLE own_feed (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       BIGINT NOT NULL,
    pruned_to BIGINT NOT NULL
);
INSERT INTO own_feed (id, seq, pruned_to)
SELECT 1, m, m FROM (SELECT GREATEST(
    (SELECT COALESCE(MAX(resource_version), 0) FROM runnables),
    (SELECT COALESCE(MAX(resource_version), 0) FROM deployables),
    (SELECT COALESCE(MAX(resource_version), 0) FROM quotas)) AS m) AS top;

-- +goose StatementBegin
CREATE FUNCTION own_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO own_changes (kind, namespace, name, uid, type)
        VALUES (TG_ARGV[0], OLD.namespace, OLD.name, OLD.uid, 'DELETED');
    ELSE
        INSERT INTO own_changes (kind, namespace, name, uid, type)
        VALUES (TG_ARGV[0], NEW.namespace, NEW.name, NEW.uid,
                CASE TG_OP WHEN 'INSERT' THEN 'ADDED' ELSE 'MODIFIED' END);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- A quota is named after its namespace and has no uid: its creation time
-- tells one from the next of the same namespace.
-- +goose StatementBegin
CREATE FUNCTION own_quota_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO own_changes (kind, namespace, name, uid, type)
        VALUES ('Quota', '', OLD.namespace, OLD.created_at::text, 'DELETED');
    ELSE
        INSERT INTO own_changes (kind, namespace, name, uid, type)
        VALUES ('Quota', '', NEW.namespace, NEW.created_at::text,
                CASE TG_OP WHEN 'INSERT' THEN 'ADDED' ELSE 'MODIFIED' END);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- A deployable's status per cluster lives in its own table: a change of
-- it is a change of the deployable as /k8s shows it.
-- +goose StatementBegin
CREATE FUNCTION own_deployable_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type)
    SELECT 'Deployable', d.namespace, d.name, d.uid, 'MODIFIED' FROM deployables d WHERE d.uid = NEW.deployable_uid;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER runnables_own_change AFTER INSERT OR UPDATE OR DELETE ON runnables
    FOR EACH ROW EXECUTE FUNCTION own_change('Runnable');
CREATE TRIGGER deployables_own_change AFTER INSERT OR UPDATE OR DELETE ON deployables
    FOR EACH ROW EXECUTE FUNCTION own_change('Deployable');
CREATE TRIGGER quotas_own_change AFTER INSERT OR UPDATE OR DELETE ON quotas
    FOR EACH ROW EXECUTE FUNCTION own_quota_change();
CREATE TRIGGER deployable_status_own_add AFTER INSERT ON deployable_status
    FOR EACH ROW EXECUTE FUNCTION own_deployable_status_change();
-- Not when only last_synced_at moved: the syncer stamps it on every pass.
CREATE TRIGGER deployable_status_own_change AFTER UPDATE ON deployable_status
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.synced_generation IS DISTINCT FROM NEW.synced_generation
        OR OLD.message IS DISTINCT FROM NEW.message OR OLD.state_generation IS DISTINCT FROM NEW.state_generation
        OR OLD.reason IS DISTINCT FROM NEW.reason)
    EXECUTE FUNCTION own_deployable_status_change();

-- +goose Down
DROP TRIGGER deployable_status_own_change ON deployable_status;
DROP TRIGGER deployable_status_own_add ON deployable_status;
DROP TRIGGER quotas_own_change ON quotas;
DROP TRIGGER deployables_own_change ON deployables;
DROP TRIGGER runnables_own_change ON runnables;
DROP FUNCTION own_deployable_status_change();
DROP FUNCTION own_quota_change();
DROP FUNCTION own_change();
DROP TABLE own_feed;
DROP TABLE own_changes;
