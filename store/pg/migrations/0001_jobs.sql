-- The job table is the queue; job_events is its append-only log (ARCHITECTURE.md, "State
-- machine"). The columns are the SQLite store's (store/migrations), with times as
-- timestamptz stamped by the database's clock, so that nodes whose clocks disagree
-- still agree on what is due and what is stale.
CREATE TABLE jobs (
    id               text PRIMARY KEY,
    -- Insertion order: the claim's last tie-break (rule 2) and a listing's cursor.
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    kind             text NOT NULL,
    -- json, not jsonb: the args and payloads come back byte for byte as written.
    args             json NOT NULL,
    status           text NOT NULL CHECK (status IN ('PENDING','PROCESSING','SUCCEEDED','FAILED','CANCELED','EXPIRED')),
    queue            text NOT NULL DEFAULT 'exports',
    priority         integer NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL,
    attempt          integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    worker           text,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    heartbeat_at     timestamptz,
    finished_at      timestamptz,
    progress_rows    bigint NOT NULL DEFAULT 0,
    progress_total   bigint,
    cancel_requested boolean NOT NULL DEFAULT false,
    error_code       text,
    error_message    text,
    file_name        text,
    file_size        bigint,
    file_sha256      text,
    idempotency_key  text,
    request_hash     text,
    warnings         json,
    created_by       text,
    -- NewJob.NotifyURL (SQLite: webhook_url): opaque to the store, read by a follow-up hook.
    notify_url       text,
    -- The job whose end created this one (a follow-up); NULL for others.
    parent_id        text
-- Room on every page for the new version of a row: a heartbeat changes no indexed
-- column, so with free space on its page the update is HOT and writes no index.
) WITH (fillfactor = 80);

-- Claim (rule 2, rule 27): one queue's PENDING jobs by priority, run_at, then insertion
-- order, so a claim reads the index in order and stops after its limit.
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, seq) WHERE status = 'PENDING';
-- Rule 11: at most one job per idempotency key (Enqueue's ON CONFLICT names it).
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Stale: the running jobs, few at any time. Not on heartbeat_at: an index on it would
-- make every heartbeat write an index entry and never be HOT.
CREATE INDEX jobs_running ON jobs (started_at) WHERE status = 'PROCESSING';
-- Delete stops a job's follow-ups (rule 21); an accepted export (no parent) writes no entry.
CREATE INDEX jobs_parent ON jobs (parent_id) WHERE parent_id IS NOT NULL;
-- Retention (rule 22): finished jobs by age. A PENDING or PROCESSING job has no entry.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status IN ('SUCCEEDED','FAILED','CANCELED','EXPIRED');

CREATE TABLE job_events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at       timestamptz NOT NULL,
    type     text NOT NULL,
    status   text NOT NULL,
    attempt  integer NOT NULL,
    data     json
);
CREATE INDEX job_events_job ON job_events (job_id, id);
