-- Events are announced on sheetq_events by the node that committed them, after the
-- commit and at most every 20 ms (announce.go), no longer by a trigger in the transaction
-- that appends them: a transaction that notifies takes a cluster-wide lock at commit, and
-- with the trigger every claim and every end of every node did.
DROP TRIGGER job_events_notify ON job_events;
DROP FUNCTION sheetq_notify_events();
