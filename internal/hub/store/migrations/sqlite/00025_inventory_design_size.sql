-- The listing's order within one namespace; see the PostgreSQL half (whose
-- change to the labels' GIN index has no counterpart here). The labels
-- ride along, as in inventory_list_order, for a selector within a
-- namespace.

-- +goose Up
CREATE INDEX inventory_namespace_order ON inventory (namespace, kind, name, cluster, uid, labels);

-- +goose Down
DROP INDEX inventory_namespace_order;
