-- Listing by report (GET /api/v1/exports?report=), newest first. The expression must be
-- written exactly as in Store.List for the planner to use the index.
CREATE INDEX jobs_report_created ON jobs (json_extract(args, '$.report'), created_at DESC, id DESC);
