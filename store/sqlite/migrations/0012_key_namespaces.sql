-- Issue 36: a client's Idempotency-Key and a schedule's firing key shared one namespace,
-- so a request sent with the key "schedule:<id>:<time>" made that firing find "its" job
-- and never run. From now on a client's key is stored as "client:<key>"
-- (store.ClientKey) and only firings use "schedule:" (store.FiringKey). The keys stored
-- before move into the client namespace, except those of real firings: a job whose args
-- name the schedule its key names (a client cannot set schedule_id).
-- Two steps, because SQLite checks the unique index row by row: "a" becoming
-- "client:a" could meet a stored "client:a" not yet renamed. A key with a control
-- character (char(1)) is one no client or firing can have, so the first step meets none.
-- A job whose args name no schedule makes the LIKE NULL: coalesce makes that "no".
UPDATE jobs SET idempotency_key = char(1) || idempotency_key
 WHERE idempotency_key IS NOT NULL
   AND NOT (idempotency_key LIKE 'schedule:%' AND CASE WHEN json_valid(args) THEN
            coalesce(idempotency_key LIKE 'schedule:' || json_extract(args, '$.schedule_id') || ':%', 0)
            ELSE 0 END);
UPDATE jobs SET idempotency_key = 'client:' || substr(idempotency_key, 2)
 WHERE idempotency_key LIKE char(1) || '%';
