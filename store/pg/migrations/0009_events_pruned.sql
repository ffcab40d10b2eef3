-- How far the event log was pruned, for EventsKept (ARCHITECTURE.md, "PostgreSQL").
-- Event ids come from a sequence, which hands out an id to a transaction that then rolls
-- back (or dies with its node) and never stores it, so the oldest stored id alone cannot
-- tell "the events before it were deleted" from "the ids before it were never used": a
-- client resuming from the head of a log that began with such a gap was sent a snapshot
-- it did not need. job_events_pruned.through is the highest id of any event ever
-- deleted, kept by triggers on every path that deletes events (a job's deletion, its
-- follow-ups', an operator's DELETE or TRUNCATE), so a cursor at or past it lost nothing.

CREATE TABLE job_events_pruned (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    through bigint NOT NULL
);

-- A log pruned before this migration: count everything before its oldest event (or,
-- when it is empty, every id assigned) as pruned, which is what EventsKept assumed.
INSERT INTO job_events_pruned (through)
SELECT COALESCE((SELECT min(id) - 1 FROM job_events),
                (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_events_id_seq));

CREATE FUNCTION sheetq_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_events_pruned SET through = g.top
    FROM (SELECT max(id) AS top FROM gone) g WHERE g.top > through;
    RETURN NULL;
END $$;
CREATE TRIGGER job_events_deleted AFTER DELETE ON job_events
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sheetq_events_deleted();

-- TRUNCATE has no transition table: every id assigned so far may have been an event.
CREATE FUNCTION sheetq_events_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_events_pruned SET through = greatest(through,
        (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_events_id_seq));
    RETURN NULL;
END $$;
CREATE TRIGGER job_events_truncated AFTER TRUNCATE ON job_events
    FOR EACH STATEMENT EXECUTE FUNCTION sheetq_events_truncated();
