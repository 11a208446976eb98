-- The listing's order within one namespace, so that a page of a namespace
-- of any kind (GET /api/v1/inventory?namespace=..., the console's view of
-- a team's objects) is a range scan. inventory_list_order leads with kind:
-- with the namespace fixed and the kind not, PostgreSQL walked that whole
-- index in order, testing the namespace of each entry, until the page was
-- full, and a namespace late in the alphabet read most of it (176 ms for
-- the first page of 500 at 1,000,000 records: docs/benchmarks.md, "The
-- inventory at design size"). With the namespace fixed, the order (kind,
-- namespace, name, cluster, uid) is this index's order after its first
-- column.

-- +goose Up
CREATE INDEX inventory_namespace_order ON inventory (namespace, kind, name, cluster, uid);

-- +goose Down
DROP INDEX inventory_namespace_order;
