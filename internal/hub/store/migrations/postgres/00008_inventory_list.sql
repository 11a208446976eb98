-- Indexes of listing the inventory (GET /api/v1/inventory), so that a page
-- costs about the records it returns rather than all those of its kind.
--
-- inventory_list_order is the listing's whole sort key, (kind, namespace,
-- name, cluster, uid): a page is a range scan of the index from the
-- continue token that stops after `limit` rows. The index it replaces
-- ended at name, so PostgreSQL read every record after the token and
-- sorted them for each page, which made a whole listing quadratic.
--
-- inventory_labels indexes each record's labels as key-value pairs
-- (jsonb_path_ops), so that a selector of a value (`key=value`, `key in
-- (...)`, written as @>) finds its matches without parsing the labels of
-- every record (dialect.labelConditions); the planner still prefers the
-- ordered scan above when the statistics say a pair is common. The column
-- stays TEXT: the index is on its jsonb cast. jsonb_path_ops rather than
-- the default jsonb_ops, which also indexes keys and could then serve
-- `key` selectors: with it, app=web-7 had to read the entries of key app,
-- which every record has, and the planner preferred to read the table. A
-- GIN index rather than a side table with a row per label (as SQLite
-- would need): new entries go to the index's pending list, which costs
-- UpsertInventory 1-4 %, where a row per label and its two B-trees cut the
-- ingester's events/s by 40 %.

-- +goose Up
DROP INDEX inventory_kind_namespace_name;
CREATE INDEX inventory_list_order ON inventory (kind, namespace, name, cluster, uid);
CREATE INDEX inventory_labels ON inventory USING gin ((labels::jsonb) jsonb_path_ops);

-- +goose Down
DROP INDEX inventory_labels;
DROP INDEX inventory_list_order;
CREATE INDEX inventory_kind_namespace_name ON inventory (kind, namespace, name);
