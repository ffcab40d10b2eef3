-- Issue 40: checkpoints and resume.
--
-- A running attempt's checkpoint: how far its source and its file got, opaque to the
-- store (the job kind's JSON), written with a heartbeat and fenced like one. The attempt
-- that takes over a recovered job reads it and continues from there. A success clears
-- it; the column is read only by id, so it needs no index.
ALTER TABLE jobs ADD COLUMN checkpoint BLOB;
