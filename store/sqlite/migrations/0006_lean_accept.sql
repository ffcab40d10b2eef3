-- Accepting a job writes as few B-trees as it can: every index a PENDING row enters is a
-- page in the WAL and in the fsync before its 202 (BENCHMARKS.md, "Fourth session").
-- Listings are newest first by insertion order (rowid), which needs no index: the table
-- itself is in that order. The filters use partial indexes of the jobs that have left
-- PENDING, so a worker writes them when it claims or finishes a job, not the request
-- that accepts it; PENDING jobs are found through jobs_claim. Each index ends in the
-- rowid, so an equality on its columns reads them newest first without a sort.
DROP INDEX jobs_created;
DROP INDEX jobs_status_created;
DROP INDEX jobs_kind_created;
DROP INDEX jobs_report_created;
CREATE INDEX jobs_settled_status ON jobs (kind, status) WHERE status <> 'PENDING';
-- The expression must be written exactly as in Store.List for the planner to use it.
CREATE INDEX jobs_settled_report ON jobs (kind, json_extract(args, '$.report')) WHERE status <> 'PENDING';
