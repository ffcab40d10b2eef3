-- Issue 43: a claim writes fewer index entries. The listing indexes of 0006 and 0013 held
-- every job that had left PENDING, so a claim inserted the job into all three (and
-- computed json_extract of its args for one) and its end moved it within them again:
-- with jobs_claim and jobs_running, five indexes changed per claim, inside the writer's
-- one transaction that every write waits for (rule 31). They now hold only jobs that
-- have ended, as PostgreSQL's do; a claim changes jobs_claim and jobs_running, and
-- running jobs, as few as the workers, are listed through jobs_running. The condition is
-- two terms, not NOT IN, so that a query naming both uses the index (Store.List).
DROP INDEX jobs_settled_status;
DROP INDEX jobs_settled_report;
DROP INDEX jobs_settled_created_by;
CREATE INDEX jobs_settled_status ON jobs (kind, status) WHERE status <> 'PENDING' AND status <> 'PROCESSING';
-- The expression must be written exactly as in Store.List for the planner to use it.
CREATE INDEX jobs_settled_report ON jobs (kind, json_extract(args, '$.report')) WHERE status <> 'PENDING' AND status <> 'PROCESSING';
CREATE INDEX jobs_settled_created_by ON jobs (created_by) WHERE status <> 'PENDING' AND status <> 'PROCESSING';
