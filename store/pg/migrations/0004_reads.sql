-- The listings of the API and the pages (Store.List, store/pg/reads.go) and the readiness
-- probe's row (Store.ProbeWrite).
--
-- Listings are newest first by insertion order (seq). SQLite reads that order from its
-- table for free (rowid); a PostgreSQL heap has no order, so jobs_seq holds it. It is the
-- one listing entry an accept writes (rule 18): seq only grows, so the entry goes to the
-- rightmost leaf, which is always in memory. The status and report filters use partial
-- indexes of FINISHED jobs, which neither the accept nor the claim writes (the claim's
-- PROCESSING row leaves them out); the unfinished jobs of a filter are found through
-- jobs_claim (PENDING) and jobs_running (PROCESSING), few by nature. Each index ends in
-- seq, so an equality on its other columns reads it newest first without a sort, and a
-- cursor (seq < n) starts the scan in the right place.
--
-- None of these names heartbeat_at or the progress columns, and none of their columns
-- changes while a job runs: a heartbeat stays a HOT update (pg.TestHeartbeatIsHOT).
CREATE INDEX jobs_seq ON jobs (seq);
-- The final-state list is written exactly as in List and FinishedOlderThan, so that the
-- planner can prove a query's status implies it.
CREATE INDEX jobs_final_status ON jobs (kind, status, seq)
    WHERE status IN ('SUCCEEDED','FAILED','CANCELED','EXPIRED');
-- The expression must be written exactly as in List (args ->> 'report') for the planner
-- to use it.
CREATE INDEX jobs_final_report ON jobs (kind, (args ->> 'report'), seq)
    WHERE status IN ('SUCCEEDED','FAILED','CANCELED','EXPIRED');

-- One row that GET /readyz rewrites at most once a second (by the database's clock, for
-- every node together), to learn that the database takes writes: a standby after a
-- failover, or default_transaction_read_only, refuses it. Updating its one unindexed
-- column is a HOT update on a page of its own, so the probes leave no bloat behind.
CREATE TABLE write_probe (
    id integer PRIMARY KEY CHECK (id = 1),
    at timestamptz NOT NULL
);
INSERT INTO write_probe (id, at) VALUES (1, '-infinity');
