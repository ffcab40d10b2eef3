-- The job store on MySQL 8.0+ and MariaDB 10.6+ (ARCHITECTURE.md, "MySQL and MariaDB"):
-- the PostgreSQL store's tables as they are after its migration 0013, in one file.
--
-- InnoDB, utf8mb4. Ids, keys, kinds, queues and states are VARBINARY: compared byte for
-- byte, with no collation that folds case or pads with spaces (two idempotency keys that
-- differ only by case or by a trailing space are two keys). JSON is kept as LONGTEXT
-- in utf8mb4_bin, never MySQL's JSON type, which rewrites the document (MariaDB's JSON
-- is LONGTEXT anyway): args, warnings and event data come back byte for byte. Times are
-- DATETIME(6) in UTC, stamped by the database's clock (UTC_TIMESTAMP(6)).
CREATE TABLE jobs (
    id                 VARBINARY(255) NOT NULL PRIMARY KEY,
    -- Insertion order: the claim's last tie-break (rule 2) and a listing's cursor.
    seq                BIGINT NOT NULL AUTO_INCREMENT UNIQUE,
    kind               VARBINARY(255) NOT NULL,
    args               LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    status             VARBINARY(16) NOT NULL,
    queue              VARBINARY(255) NOT NULL DEFAULT 'exports',
    priority           INT NOT NULL DEFAULT 0,
    run_at             DATETIME(6) NOT NULL,
    attempt            INT NOT NULL DEFAULT 0,
    max_attempts       INT NOT NULL DEFAULT 3,
    attempt_base       INT NOT NULL DEFAULT 0,
    worker             TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    created_at         DATETIME(6) NOT NULL,
    started_at         DATETIME(6),
    heartbeat_at       DATETIME(6),
    finished_at        DATETIME(6),
    progress_rows      BIGINT NOT NULL DEFAULT 0,
    progress_total     BIGINT,
    cancel_requested   BOOLEAN NOT NULL DEFAULT FALSE,
    error_code         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    error_message      LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    file_name          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    file_size          BIGINT,
    file_sha256        VARBINARY(128),
    idempotency_key    VARBINARY(2048),
    request_hash       VARBINARY(255),
    warnings           LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    created_by         VARBINARY(1200),
    -- NewJob.NotifyURL: opaque to the store, read by a follow-up hook.
    notify_url         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    -- The job whose end created this one (a follow-up); NULL for others.
    parent_id          VARBINARY(255),
    -- A running attempt's checkpoint (rule 30) and the attempt that wrote it.
    checkpoint         LONGBLOB,
    checkpoint_attempt INT,
    CONSTRAINT jobs_status CHECK (status IN ('PENDING','PROCESSING','SUCCEEDED','FAILED','CANCELED','EXPIRED')),
    CONSTRAINT jobs_max_attempts CHECK (max_attempts >= 1),
    -- Claim (rules 2, 27): MySQL has no partial index, so the state leads.
    INDEX jobs_claim (status, queue, priority, run_at, seq),
    -- Rule 11: at most one job per idempotency key (NULLs do not collide).
    UNIQUE INDEX jobs_idempotency_key (idempotency_key),
    -- Stale, and the state filters of the listings.
    INDEX jobs_status (status, seq),
    -- Delete stops a job's follow-ups (rule 21).
    INDEX jobs_parent (parent_id),
    -- Retention (rule 22).
    INDEX jobs_finished (finished_at),
    -- Listings by kind, and a member's own exports.
    INDEX jobs_kind (kind, status, seq),
    INDEX jobs_created_by (created_by, seq)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- The append-only log (rule 10). Ids come from AUTO_INCREMENT, which like a PostgreSQL
-- sequence hands values out in the order transactions ask, not the order they commit;
-- the store inserts events only while it holds event_clock's row lock, which it keeps
-- until its COMMIT, so on this database ids do commit in order (store/mysql/events.go).
CREATE TABLE job_events (
    id      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id  VARBINARY(255) NOT NULL,
    at      DATETIME(6) NOT NULL,
    type    VARBINARY(255) NOT NULL,
    status  VARBINARY(16) NOT NULL,
    attempt INT NOT NULL,
    data    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    INDEX job_events_job (job_id, id)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- One row: the lock every transaction that appends events takes just before its events
-- and holds to its COMMIT (n counts those transactions), and how far the log was pruned
-- (the highest id of any event ever deleted, for EventsKept).
CREATE TABLE event_clock (
    one    TINYINT NOT NULL PRIMARY KEY,
    n      BIGINT NOT NULL,
    pruned BIGINT NOT NULL,
    CONSTRAINT event_clock_one CHECK (one = 1)
) ENGINE = InnoDB;
INSERT INTO event_clock (one, n, pruned) VALUES (1, 0, 0);

-- The row GET /readyz rewrites at most once a second, by the database's clock.
CREATE TABLE write_probe (
    id TINYINT NOT NULL PRIMARY KEY,
    at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
INSERT INTO write_probe (id, at) VALUES (1, '1970-01-01 00:00:00');

-- Schedules (rule 29): each firing is an export whose idempotency key names (schedule,
-- time); next_run_at moves on in the same transaction, compared with what the firing
-- node read, so a firing happens once on any number of nodes.
CREATE TABLE schedules (
    id             VARBINARY(255) NOT NULL PRIMARY KEY,
    report         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    params         LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    format         VARBINARY(16) NOT NULL DEFAULT 'xlsx',
    bom            BOOLEAN NOT NULL DEFAULT FALSE,
    cron           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    timezone       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    deliver        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    owner          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    paused         BOOLEAN NOT NULL DEFAULT FALSE,
    -- NULL while the schedule is paused.
    next_run_at    DATETIME(6),
    last_fired_for DATETIME(6),
    created_at     DATETIME(6) NOT NULL,
    updated_at     DATETIME(6) NOT NULL,
    INDEX schedules_due (next_run_at)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- The audit log (issue 39): seq is the listing's order and cursor, and only grows.
CREATE TABLE audit_log (
    seq    BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at     DATETIME(6) NOT NULL,
    actor  VARBINARY(1200) NOT NULL,
    action VARBINARY(255) NOT NULL,
    job    VARBINARY(255) NOT NULL DEFAULT '',
    report VARBINARY(1200) NOT NULL DEFAULT '',
    ip     VARBINARY(255) NOT NULL DEFAULT '',
    detail TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    INDEX audit_actor (actor, seq),
    INDEX audit_action (action, seq),
    INDEX audit_job (job, seq),
    INDEX audit_at (at)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- The people seen: each one's identity as at their last sign-in, kept byte for byte.
CREATE TABLE people (
    name    VARBINARY(1200) NOT NULL PRIMARY KEY,
    who     LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    seen_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
