-- What the inventory at its design size (1,000,000 records of 100
-- clusters, 1,000 changes a second) needed of its indexes
-- (docs/benchmarks.md, "The inventory at design size").
--
-- inventory_namespace_order is the listing's order within one namespace,
-- so that a page of a namespace of any kind (GET
-- /api/v1/inventory?namespace=..., the console's view of a team's
-- objects) is a range scan. inventory_list_order leads with kind: with the
-- namespace fixed and the kind not, PostgreSQL walked that whole index in
-- order, testing the namespace of each entry, until the page was full, and
-- a namespace late in the alphabet read most of it (176 ms for the first
-- page of 500). With the namespace fixed, the order (kind, namespace,
-- name, cluster, uid) is this index's order after its first column.
--
-- inventory_labels keeps at most 256 kB of pending entries instead of
-- gin_pending_list_limit's 4 MB. A GIN index takes new entries into an
-- unsorted pending list, merged into the index when it outgrows the limit
-- (or by vacuum), and every search reads the whole list: under 1,000
-- changes a second it stayed near its 4 MB, and its scan was 30-50 ms of
-- every label selector. A smaller list is merged more often, in smaller
-- merges, by the write that fills it.

-- +goose Up
CREATE INDEX inventory_namespace_order ON inventory (namespace, kind, name, cluster, uid);
ALTER INDEX inventory_labels SET (gin_pending_list_limit = 256);

-- +goose Down
ALTER INDEX inventory_labels RESET (gin_pending_list_limit);
DROP INDEX inventory_namespace_order;
