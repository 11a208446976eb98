-- When a create sent for the attempt's object can last take effect; see
-- the PostgreSQL half.

-- +goose Up
ALTER TABLE attempts ADD COLUMN create_landed_by TEXT;

-- +goose Down
ALTER TABLE attempts DROP COLUMN create_landed_by;
