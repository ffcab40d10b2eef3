-- Issue 39: people, groups and permissions.
--
-- The audit log: who did what, when, from which address, to which export and report.
-- seq only grows (AUTOINCREMENT: a seq is never given out twice, even after pruning
-- removed the newest entries), and is the listing's order and cursor. at is Unix
-- milliseconds. Each filter of the Audit page has an index that ends in the rowid, so
-- an equality reads it newest first without a sort; audit_at is what pruning reads.
CREATE TABLE audit_log (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    job    TEXT NOT NULL DEFAULT '',
    report TEXT NOT NULL DEFAULT '',
    ip     TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_actor ON audit_log (actor);
CREATE INDEX audit_action ON audit_log (action);
-- Sign-ins name no export: they stay out. Store.AuditLog says "job <> ''" for the
-- planner to use it.
CREATE INDEX audit_job ON audit_log (job) WHERE job <> '';
CREATE INDEX audit_at ON audit_log (at);

-- The people seen: each one's identity (the JSON of app/access.Who) as at their last
-- sign-in, so that a schedule binds its owner's attributes when it fires.
CREATE TABLE people (
    name    TEXT PRIMARY KEY,
    who     TEXT NOT NULL,
    seen_at INTEGER NOT NULL
);

-- A member's listing of their own exports (ListOptions.CreatedBy). As in 0006, a
-- partial index of the jobs that left PENDING, written by the worker that claims or
-- ends a job, not by the request that accepts it (rule 18); PENDING jobs are found
-- through jobs_claim. It ends in the rowid, so it reads newest first without a sort.
CREATE INDEX jobs_settled_created_by ON jobs (created_by) WHERE status <> 'PENDING';
