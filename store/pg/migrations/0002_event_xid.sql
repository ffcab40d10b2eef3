-- A commit-safe order for the event log (ARCHITECTURE.md, "PostgreSQL"; issue 17).
-- Identity values are taken in the order transactions ask for them, not the order they
-- commit, so "id > cursor" can skip an event whose transaction commits late. Each event
-- also records the id of the transaction that wrote it (pg_current_xact_id() gives the
-- top-level transaction's xid8, which never wraps around); a reader delivers only events
-- whose transaction is older than its snapshot's xmin, every one of which has ended, in
-- (xid, id) order, so nothing can later appear behind its cursor (store/pg/events.go).
--
-- The volatile default rewrites the table once: rows written before this migration all
-- get the migrating transaction's xid and keep their id order.
ALTER TABLE job_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();

-- EventsSince reads a range of (xid, id) in order and stops after its limit.
CREATE INDEX job_events_xid ON job_events (xid, id);
