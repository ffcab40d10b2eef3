-- Wake-ups across nodes (ARCHITECTURE.md, "PostgreSQL"; issue 17). Triggers, not the
-- store's methods, send the notifications, so that every path that makes a job runnable
-- (an enqueue, a follow-up, a retry, a recovered or requeued attempt, a failed attempt
-- that will run again) wakes the other nodes without each remembering to. A notification
-- carries ids only, never job data, and is delivered when its transaction commits (never
-- for one that rolls back). PostgreSQL folds identical notifications of one transaction
-- into one. A notification is a hint: the receiver reads the table (store/pg/notify.go).
--
-- Channels are per database, not per schema: stores on two schemas of one database wake
-- each other now and then for nothing, which costs one read.

-- sheetq_ready, payload a queue name: a job of that queue became PENDING (to run now or
-- at its run_at, which the woken lane reads as its next wake-up).
--
-- Inserts notify once per statement and queue: a statement that inserts a batch of jobs
-- (a group-committed enqueue, a job's follow-ups) sends one notification per queue.
CREATE FUNCTION sheetq_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sheetq_ready', q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'PENDING') q;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_notify_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION sheetq_notify_inserted();

-- Updates notify per row, and only rows whose update names status and leaves it PENDING.
-- A statement-level trigger with a transition table would fire on every heartbeat and
-- copy each heartbeat's row into the table (PostgreSQL allows no column list with
-- transition tables); a row trigger's column list and WHEN skip a heartbeat, which sets
-- no status, before any function runs. Updates that make a job PENDING are one row each.
CREATE FUNCTION sheetq_notify_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sheetq_ready', NEW.queue);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_notify_pending AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'PENDING') EXECUTE FUNCTION sheetq_notify_pending();

-- sheetq_cancel, payload a job id: a cancel was requested for a running job (Cancel, or
-- Delete stopping a running follow-up). The node that runs it stamps its heartbeat at
-- once, and that fenced read of cancel_requested decides (rule 4), not this hint.
CREATE FUNCTION sheetq_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sheetq_cancel', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_notify_cancel AFTER UPDATE OF cancel_requested ON jobs
    FOR EACH ROW WHEN (NEW.cancel_requested AND NEW.status = 'PROCESSING')
    EXECUTE FUNCTION sheetq_notify_cancel();

-- sheetq_events, empty payload: events were appended; event hubs read after their cursors.
CREATE FUNCTION sheetq_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM appended) THEN
        PERFORM pg_notify('sheetq_events', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER job_events_notify AFTER INSERT ON job_events
    REFERENCING NEW TABLE AS appended FOR EACH STATEMENT EXECUTE FUNCTION sheetq_notify_events();
