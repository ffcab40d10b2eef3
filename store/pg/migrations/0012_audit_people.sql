-- Issue 39: people, groups and permissions; the same tables as the SQLite store's 0013.
--
-- The audit log: who did what, when, from which address, to which export and report.
-- seq is the listing's order and cursor. Each filter of the Audit page has an index
-- that ends in seq, so an equality reads it newest first without a sort; audit_at is
-- what pruning reads.
CREATE TABLE audit_log (
    seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text NOT NULL,
    action text NOT NULL,
    job    text NOT NULL DEFAULT '',
    report text NOT NULL DEFAULT '',
    ip     text NOT NULL DEFAULT '',
    detail text NOT NULL DEFAULT ''
);
CREATE INDEX audit_actor ON audit_log (actor, seq);
CREATE INDEX audit_action ON audit_log (action, seq);
-- Sign-ins name no export: they stay out. AuditLog says "job <> ''" for the planner.
CREATE INDEX audit_job ON audit_log (job, seq) WHERE job <> '';
CREATE INDEX audit_at ON audit_log (at);

-- The people seen: each one's identity (the JSON of app/access.Who, kept as text, byte
-- for byte) as at their last sign-in, so that a schedule binds its owner's attributes
-- when it fires.
CREATE TABLE people (
    name    text PRIMARY KEY,
    who     text NOT NULL,
    seen_at timestamptz NOT NULL
);

-- A member's listing of their own exports (ListOptions.CreatedBy), as 0004's: the
-- finished jobs through a partial index that neither the accept nor the claim writes,
-- the unfinished ones through jobs_claim and jobs_running.
CREATE INDEX jobs_final_created_by ON jobs (created_by, seq)
    WHERE status IN ('SUCCEEDED','FAILED','CANCELED','EXPIRED');
