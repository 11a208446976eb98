-- The generation of the runnable's spec the attempt's object carries; see
-- the PostgreSQL half.

-- +goose Up
ALTER TABLE attempts ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
UPDATE attempts SET generation = (SELECT r.generation FROM runnables r WHERE r.uid = attempts.runnable_uid);

-- +goose Down
ALTER TABLE attempts DROP COLUMN generation;
