-- The index of listing the inventory (GET /api/v1/inventory); see the
-- PostgreSQL half for why the whole sort key.
--
-- The labels ride along in each index entry, so that a label selector
-- tests them without reading the record from the table: one pass over the
-- entries of the listed range, with a cheap substring test first
-- (dialect.labelConditions). SQLite has no inverted index; a side table
-- with a row per label, kept in the same transaction as the records, made
-- a page of a selector cost only its matches but the inventory's writes
-- 60-70 % slower (each label row is B-tree entries written and synced with
-- the record), where widening this index costs them about 3 %: every
-- update of a record rewrites its entry here anyway.

-- +goose Up
DROP INDEX inventory_kind_namespace_name;
CREATE INDEX inventory_list_order ON inventory (kind, namespace, name, cluster, uid, labels);

-- +goose Down
DROP INDEX inventory_list_order;
CREATE INDEX inventory_kind_namespace_name ON inventory (kind, namespace, name);
