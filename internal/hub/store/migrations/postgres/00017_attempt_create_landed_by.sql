-- The latest moment a create the submitter sent for the attempt's object
-- can take effect on its cluster: written before each send, so that a
-- create retried across a partition and landing after the cluster's
-- agent fenced is waited for before an AtMostOne runnable moves.
--   create_landed_by: NULL while no create was sent

-- +goose Up
ALTER TABLE attempts ADD COLUMN create_landed_by TIMESTAMPTZ;

-- +goose Down
ALTER TABLE attempts DROP COLUMN create_landed_by;
