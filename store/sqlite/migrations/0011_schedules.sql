-- Issue 20: scheduled exports. A schedule is a report, its parameters (literal values and
-- relative dates, as given), a cron expression in an IANA time zone, an owner and where
-- to deliver. Each firing is an export job whose idempotency key names (schedule,
-- scheduled time); the schedule's next_run_at moves on in the same transaction, compared
-- with the value the firing node read, so a firing happens once on any number of nodes.
CREATE TABLE schedules (
    id             TEXT PRIMARY KEY,
    report         TEXT NOT NULL,
    params         TEXT NOT NULL,
    format         TEXT NOT NULL DEFAULT 'xlsx',
    bom            INTEGER NOT NULL DEFAULT 0,
    cron           TEXT NOT NULL,
    timezone       TEXT NOT NULL,
    deliver        TEXT,
    owner          TEXT,
    paused         INTEGER NOT NULL DEFAULT 0,
    -- Unix milliseconds. next_run_at is NULL while the schedule is paused.
    next_run_at    INTEGER,
    last_fired_for INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
-- What is due: the firing loop's one read.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
