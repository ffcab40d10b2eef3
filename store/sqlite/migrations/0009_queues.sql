-- Issue 16: every job runs in a queue (a lane) with workers of its own, so that a
-- webhook delivery never waits behind hour-long exports (ARCHITECTURE.md, rule 27).
ALTER TABLE jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'exports';
-- Deliveries queued before this migration go to their own lane.
UPDATE jobs SET queue = 'webhooks' WHERE kind = 'webhook';
-- The claim index is replaced, not joined by another (rule 18: an accept writes few
-- pages): a claim looks in one queue, by priority, run_at, then insertion order (the
-- rowid every index ends in). The name stays: List pins its PENDING part to it.
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at) WHERE status = 'PENDING';
