-- Why a deployable's object is not on a cluster, as a word a script can
-- compare (AdmissionDenied: the syncer's admission of the object as it
-- would be written refused it); the message beside it says it in words.
--   reason: '' when there is none, and in rows written before it was

-- +goose Up
ALTER TABLE deployable_status ADD COLUMN reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE deployable_status DROP COLUMN reason;
