-- The change sequence of purser's own kinds (runnables, deployables,
-- quotas), which /k8s watches read (store/own_changes.go). Triggers append
-- one row per write in the writer's own transaction, so that no write
-- path can forget it; the row's position (pos) is given after commit
-- (OwnFeed.Number), as on PostgreSQL, where a number taken at insert could
-- commit out of order (SQLite has one writer, but one scheme serves both).
--
-- own_feed.seq starts at the highest resourceVersion the three tables
-- hold, and pruned_to with it: an object's own resourceVersion, which
-- client-go resumes a watch from, is then never above the position of its
-- last change, so a watch resumed from it misses nothing.

-- +goose Up
CREATE TABLE own_changes (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    pos       INTEGER UNIQUE,
    kind      TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    uid       TEXT NOT NULL,
    type      TEXT NOT NULL,
    at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
) STRICT;
CREATE INDEX own_changes_unnumbered ON own_changes (id) WHERE pos IS NULL;
CREATE INDEX own_changes_at ON own_changes (at) WHERE pos IS NOT NULL;

CREATE TABLE own_feed (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       INTEGER NOT NULL,
    pruned_to INTEGER NOT NULL
) STRICT;
INSERT INTO own_feed (id, seq, pruned_to)
SELECT 1, m, m FROM (SELECT MAX(
    (SELECT COALESCE(MAX(resource_version), 0) FROM runnables),
    (SELECT COALESCE(MAX(resource_version), 0) FROM deployables),
    (SELECT COALESCE(MAX(resource_version), 0) FROM quotas)) AS m);

-- +goose StatementBegin
CREATE TRIGGER runnables_own_insert AFTER INSERT ON runnables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Runnable', NEW.namespace, NEW.name, NEW.uid, 'ADDED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER runnables_own_update AFTER UPDATE ON runnables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Runnable', NEW.namespace, NEW.name, NEW.uid, 'MODIFIED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER runnables_own_delete AFTER DELETE ON runnables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Runnable', OLD.namespace, OLD.name, OLD.uid, 'DELETED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER deployables_own_insert AFTER INSERT ON deployables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Deployable', NEW.namespace, NEW.name, NEW.uid, 'ADDED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER deployables_own_update AFTER UPDATE ON deployables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Deployable', NEW.namespace, NEW.name, NEW.uid, 'MODIFIED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER deployables_own_delete AFTER DELETE ON deployables FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Deployable', OLD.namespace, OLD.name, OLD.uid, 'DELETED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER quotas_own_insert AFTER INSERT ON quotas FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Quota', '', NEW.namespace, NEW.created_at, 'ADDED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER quotas_own_update AFTER UPDATE ON quotas FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Quota', '', NEW.namespace, NEW.created_at, 'MODIFIED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER quotas_own_delete AFTER DELETE ON quotas FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type) VALUES ('Quota', '', OLD.namespace, OLD.created_at, 'DELETED');
END;
-- +goose StatementEnd
-- A deployable's status per cluster lives in its own table: a change of
-- it is a change of the deployable as /k8s shows it; not when only
-- last_synced_at moved, which the syncer stamps on every pass.
-- +goose StatementBegin
CREATE TRIGGER deployable_status_own_insert AFTER INSERT ON deployable_status FOR EACH ROW BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type)
    SELECT 'Deployable', namespace, name, uid, 'MODIFIED' FROM deployables WHERE uid = NEW.deployable_uid;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER deployable_status_own_update AFTER UPDATE ON deployable_status FOR EACH ROW
WHEN OLD.state IS NOT NEW.state OR OLD.synced_generation IS NOT NEW.synced_generation OR OLD.message IS NOT NEW.message
    OR OLD.state_generation IS NOT NEW.state_generation OR OLD.reason IS NOT NEW.reason BEGIN
    INSERT INTO own_changes (kind, namespace, name, uid, type)
    SELECT 'Deployable', namespace, name, uid, 'MODIFIED' FROM deployables WHERE uid = NEW.deployable_uid;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER deployable_status_own_update;
DROP TRIGGER deployable_status_own_insert;
DROP TRIGGER quotas_own_delete;
DROP TRIGGER quotas_own_update;
DROP TRIGGER quotas_own_insert;
DROP TRIGGER deployables_own_delete;
DROP TRIGGER deployables_own_update;
DROP TRIGGER deployables_own_insert;
DROP TRIGGER runnables_own_delete;
DROP TRIGGER runnables_own_update;
DROP TRIGGER runnables_own_insert;
DROP TABLE own_feed;
DROP TABLE own_changes;
