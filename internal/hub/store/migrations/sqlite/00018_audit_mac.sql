-- Each audit entry's MAC; see the PostgreSQL half.

-- +goose Up
ALTER TABLE audit_log ADD COLUMN mac TEXT;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN mac;
