-- The listings by report (List with ListOptions.Report: an export's page of its report)
-- read an index of their own, as PostgreSQL's jobs_final_report (its migration 0004) and
-- SQLite's: without it a rare report's newest exports were found by reading every job
-- newer than them. MySQL and MariaDB index an expression through a generated column: a
-- VIRTUAL one, computed on insert for the index and never stored in the row. JSON that
-- is not valid (args are JSON by contract; the guard keeps an insert from failing on a
-- server whose JSON_EXTRACT errors) and a job without a report give NULL; a name is cut
-- at 191 characters (the index's key), and List compares the whole name besides.
ALTER TABLE jobs
    ADD COLUMN report VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
        AS (LEFT(IF(JSON_VALID(args), JSON_UNQUOTE(JSON_EXTRACT(args, '$.report')), NULL), 191)) VIRTUAL,
    ADD INDEX jobs_report (kind, report, seq);
