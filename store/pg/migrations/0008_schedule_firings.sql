-- A schedule's firings are read by their idempotency keys ("schedule:<id>:<time>",
-- store.FiringKey), in byte order whatever the database's collation: a small partial
-- index of the firings alone, in the "C" collation, so that a range of one schedule's keys
-- is one index scan and no other export pays for it.
CREATE INDEX jobs_schedule_firings ON jobs ((idempotency_key COLLATE "C"))
    WHERE idempotency_key LIKE 'schedule:%';
