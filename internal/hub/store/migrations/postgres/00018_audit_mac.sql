-- Each audit entry's MAC: an HMAC of its hash under a key that purser's
-- writers hold and the database does not, so that an entry appended by
-- hand, however well chained, is told from one purser wrote.
--   mac: hex; NULL in entries written before MACs were

-- +goose Up
ALTER TABLE audit_log ADD COLUMN mac TEXT;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN mac;
