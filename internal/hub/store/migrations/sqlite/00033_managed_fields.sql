-- Server-side apply's record of which field manager owns which fields of
-- an object of purser's kinds written through /k8s (entries: JSON of
-- []metav1.ManagedFieldsEntry). It is kept beside the object rather than
-- in its stored document so that the REST API's writes, which know
-- nothing of it, never drop it; identity is the object's uid (a quota's
-- creation time), and a record of another identity is of an object since
-- deleted, read as none. /k8s writes a record in the transaction that
-- writes its object.

-- +goose Up
CREATE TABLE managed_fields (
    kind      TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    identity  TEXT NOT NULL,
    entries   TEXT NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);

-- +goose Down
DROP TABLE managed_fields;
