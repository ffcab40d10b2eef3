-- Issue 20: scheduled exports, as in the SQLite store (store/migrations/0011). Each
-- firing is an export job whose idempotency key names (schedule, scheduled time); the
-- schedule's next_run_at moves on in the same transaction, compared with the value the
-- firing node read, so a firing happens once on any number of nodes. Times compared
-- across nodes are the database's (now()).
CREATE TABLE schedules (
    id             text PRIMARY KEY,
    report         text NOT NULL,
    -- json, not jsonb: params and deliveries come back byte for byte as given.
    params         json NOT NULL,
    format         text NOT NULL DEFAULT 'xlsx',
    bom            boolean NOT NULL DEFAULT false,
    cron           text NOT NULL,
    timezone       text NOT NULL,
    deliver        json,
    owner          text,
    paused         boolean NOT NULL DEFAULT false,
    -- NULL while the schedule is paused.
    next_run_at    timestamptz,
    last_fired_for timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
-- What is due: the firing loop's one read, on every node.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
