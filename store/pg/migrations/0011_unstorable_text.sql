-- Issue 36: rows an earlier version stored with a json string PostgreSQL cannot read as
-- text: the escape \u0000 (a NUL), or half of a UTF-16 surrogate pair (\ud800 alone).
-- The json type took them, but ->> fails on such a document, and with it the partial
-- index jobs_final_report (0004): the job could never end, its worker retried forever,
-- and every node's start failed on it. The store now refuses them (store/pg/nul.go);
-- this repairs what is stored, replacing each such escape with \ufffd (U+FFFD).
--
-- A finished job was read by jobs_final_report when it ended, so only PENDING and
-- PROCESSING jobs can hold one. An unfinished export that does is not run with a value
-- its client did not send: it ends FAILED (CANCELED if a cancel was requested) with
-- code "unstorable" and its event, as the store would end it, except that no follow-up
-- (a webhook) is made: that is the kind's code, not SQL. A PROCESSING one that a node
-- still runs loses its lease at its next heartbeat (rule 3). Other jobs (deliveries,
-- whose args copy an export's) and schedules keep running, with U+FFFD in place.

-- sheetq_0011_readable is a JSON document's text with every unreadable escape replaced.
-- A backslash starts an escape only when it is not itself escaped: every "\\" is first
-- set aside as chr(1), which valid json text cannot hold (the type refuses control
-- characters in strings, and outside them there is only white space).
CREATE FUNCTION sheetq_0011_readable(doc text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT replace(
    regexp_replace(
        regexp_replace(
            replace(replace(doc, '\\', chr(1)), '\u0000', '\ufffd'),
            -- a high surrogate not followed by a low one
            '\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})', '\\ufffd', 'g'),
        -- a low surrogate not after a high one
        '(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}', '\\ufffd', 'g'),
    chr(1), '\\')
$$;

WITH ended AS (
    UPDATE jobs SET args = sheetq_0011_readable(args::text)::json,
        status = CASE WHEN cancel_requested THEN 'CANCELED' ELSE 'FAILED' END,
        finished_at = now(), worker = NULL, error_code = 'unstorable',
        error_message = 'its parameters held a NUL character (U+0000) or another value the database cannot '
            || 'store, which an earlier version accepted; the upgrade replaced it with U+FFFD and ended the '
            || 'export: send it again without that character'
    WHERE kind = 'export' AND status IN ('PENDING', 'PROCESSING')
      AND sheetq_0011_readable(args::text) <> args::text
    RETURNING id, status, attempt, error_code, error_message
)
INSERT INTO job_events (job_id, at, type, status, attempt, data)
SELECT id, now(), lower(status), status, attempt,
       CASE WHEN status = 'FAILED'
            THEN json_build_object('code', error_code, 'message', error_message, 'permanent', true) END
FROM ended;

UPDATE jobs SET args = sheetq_0011_readable(args::text)::json
WHERE status IN ('PENDING', 'PROCESSING') AND sheetq_0011_readable(args::text) <> args::text;

UPDATE schedules SET params = sheetq_0011_readable(params::text)::json,
    deliver = sheetq_0011_readable(deliver::text)::json
WHERE sheetq_0011_readable(params::text) <> params::text
   OR sheetq_0011_readable(deliver::text) IS DISTINCT FROM deliver::text;

DROP FUNCTION sheetq_0011_readable(text);
