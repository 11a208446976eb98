-- What each attempt carried in and what it reported, so that the chain
-- of restore points across failovers can be followed attempt by attempt:
--   carried_in: JSON object, the preserved values the attempt's object
--               was created with, and restorePath, the restore point it
--               restored from ('' : nothing)
--   reported:   JSON object, what its object reported when it was left,
--               whether or not it was carried on ('' : nothing)
--   note:       why something reported was not carried on

-- +goose Up
ALTER TABLE attempts ADD COLUMN carried_in TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN reported TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN note TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE attempts DROP COLUMN note;
ALTER TABLE attempts DROP COLUMN reported;
ALTER TABLE attempts DROP COLUMN carried_in;
