-- The job table is the queue; job_events is its append-only log.
-- Times are Unix milliseconds (UTC) so that claims and staleness compare integers.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    args             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('PENDING','PROCESSING','SUCCEEDED','FAILED','CANCELED','EXPIRED')),
    priority         INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    worker           TEXT,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    heartbeat_at     INTEGER,
    finished_at      INTEGER,
    progress_rows    INTEGER NOT NULL DEFAULT 0,
    progress_total   INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error_code       TEXT,
    error_message    TEXT,
    file_name        TEXT,
    file_size        INTEGER,
    file_sha256      TEXT,
    idempotency_key  TEXT,
    request_hash     TEXT
);

-- Claim: the oldest runnable PENDING job by priority, run_at, then insertion order.
CREATE INDEX jobs_claim ON jobs (priority, run_at) WHERE status = 'PENDING';
-- The reaper looks only at running jobs by heartbeat age.
CREATE INDEX jobs_running ON jobs (heartbeat_at) WHERE status = 'PROCESSING';
-- Newest-first listing, optionally by status.
CREATE INDEX jobs_created ON jobs (created_at DESC);
CREATE INDEX jobs_status_created ON jobs (status, created_at DESC);
-- Rule 11: at most one job per idempotency key.
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE job_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at       INTEGER NOT NULL,
    type     TEXT NOT NULL,
    status   TEXT NOT NULL,
    attempt  INTEGER NOT NULL,
    data     TEXT
);
CREATE INDEX job_events_job ON job_events (job_id, id);
