-- Issue 4: an export may name a webhook that is told when it reaches a final state.
-- NULL: no webhook. The deliveries themselves are jobs of kind 'webhook' in this table.
ALTER TABLE jobs ADD COLUMN webhook_url TEXT;
-- Listings show one kind (exports, not webhook deliveries), newest first.
CREATE INDEX jobs_kind_created ON jobs (kind, created_at DESC);
