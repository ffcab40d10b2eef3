-- Issue 40: checkpoints and resume.
--
-- A running attempt's checkpoint: how far its source and its file got, opaque to the
-- store (the job kind's JSON), written with a heartbeat and fenced like one. The attempt
-- that takes over a recovered job reads it and continues from there. A success clears
-- it. No index reads it, so a heartbeat that writes it can still be a HOT update; a
-- large one is TOASTed.
ALTER TABLE jobs ADD COLUMN checkpoint bytea;
