-- Issue 15: the store knows no job kind. A job that another job's end created (a
-- follow-up, such as a webhook delivery) names that job, so that deleting it can stop
-- its waiting follow-ups without knowing their kind. NULL: no parent.
ALTER TABLE jobs ADD COLUMN parent_id TEXT;
-- Deliveries queued before this migration name their export in their args.
UPDATE jobs SET parent_id = json_extract(args, '$.export_id') WHERE kind = 'webhook';
-- Partial: an accepted export (no parent) writes no entry (rule 18).
CREATE INDEX jobs_parent ON jobs (parent_id) WHERE parent_id IS NOT NULL;
