-- Issue 6: the name (never the secret) of the access token that created a job.
-- NULL: created without a token (a loopback server with none set) or before this column.
ALTER TABLE jobs ADD COLUMN created_by TEXT;
