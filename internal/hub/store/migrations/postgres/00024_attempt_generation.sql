-- The generation of the runnable's spec the attempt's object carries on
-- its cluster: the spec's generation when the attempt was placed, and the
-- newer one once an update in place (PUT of a running runnable) was
-- applied to the object. The submitter finds the updates still to apply
-- where it is below the runnable's generation. Attempts before this
-- migration carry the spec as it is.
--   generation: 0 only for a row written without one

-- +goose Up
ALTER TABLE attempts ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
UPDATE attempts SET generation = r.generation FROM runnables r WHERE r.uid = attempts.runnable_uid;

-- +goose Down
ALTER TABLE attempts DROP COLUMN generation;
