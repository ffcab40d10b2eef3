package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
)

// EnqueueBatch on PostgreSQL: the core's group commit (store/batch.go) hands a group
// of Enqueues over, and they go in as one multi-row INSERT, with the "accepted" events
// in the same statement, that commits on its own. One statement is one round trip and
// one WAL flush for the whole group, where a transaction per job paid both per job.
//
// No SAVEPOINT per job: past 64 subtransactions in one transaction a backend's
// subtransaction cache overflows, and every session that checks row visibility slows
// down. A job that would break a unique index is not an error here but a row the INSERT
// skips (ON CONFLICT DO NOTHING, with no conflict target, so that the primary key is an
// arbiter as well as the idempotency key: naming only the key would let one id in use
// abort the statement and so the whole group). Every row the INSERT skipped is then
// looked up: its key's job answers it (existed, or store.ErrIdempotencyMismatch by the
// request hash, rule 11); else its id's job makes it store.ErrConflict. Two calls with
// the same key in one group give one job, the first's (the rows go in in call order,
// and the second meets the first's row); two with the same id never share a statement:
// the second waits for the next one, so that a returned row names one call.
//
// A statement the server refuses (bad data in one job that the checks let pass, such as
// arguments that are not JSON; a deadlock with another node's group over the same keys)
// commits nothing; its calls then go again one statement each, so that the bad one
// fails alone and the others commit.

// batchTimeout bounds one group's statements. Only a database that stops answering for
// this long leaves a group's outcome unknown, as any statement on a lost connection
// does (the client retries with its idempotency key).
const batchTimeout = 30 * time.Second

// enqueueCall is one job of a group and its answer.
type enqueueCall struct {
	nj    store.NewJob
	tries int // lookups that found neither its key's job nor its id's

	answered bool
	res      store.Enqueued
}

// answer sets c's result.
func (c *enqueueCall) answer(job store.Job, existed bool, err error) {
	c.res, c.answered = store.Enqueued{Job: job, Existed: existed, Err: err}, true
}

// EnqueueBatch inserts njs and answers each (store.Driver), in as few statements as the
// calls allow: one, unless two calls share an id, a key's job vanished between the
// insert and the lookup, or the server refused the statement. A job PostgreSQL cannot
// store (a NUL, nul.go) never gets here: the core asked CheckJob first.
func (s *Store) EnqueueBatch(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	calls := make([]enqueueCall, len(njs))
	for i, nj := range njs {
		calls[i].nj = nj
	}
	for {
		var round []*enqueueCall
		ids := map[string]bool{}
		for i := range calls {
			c := &calls[i]
			switch {
			case c.answered:
			case ids[c.nj.ID]:
				// Same id as a call in this round: it goes in the next one, where it
				// meets the committed row and is answered by its key or ErrConflict.
			default:
				ids[c.nj.ID] = true
				round = append(round, c)
			}
		}
		if len(round) == 0 {
			break
		}
		s.inserts.Add(1)
		s.insertRound(ctx, round)
	}
	out := make([]store.Enqueued, len(calls))
	for i := range calls {
		out[i] = calls[i].res
	}
	return out, nil
}

// insertRound inserts calls (distinct ids) in one statement and answers each one it can
// settle; a call whose key's job vanished before the lookup is left for another round,
// at most three times.
func (s *Store) insertRound(ctx context.Context, calls []*enqueueCall) {
	inserted, err := s.insertJobs(ctx, calls)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && len(calls) > 1 {
			// The server refused the statement: nothing of it committed. Each call goes
			// alone, so that one bad job fails by itself.
			for _, c := range calls {
				s.insertRound(ctx, []*enqueueCall{c})
			}
			return
		}
		for _, c := range calls {
			c.answer(store.Job{}, false, unstorable(err))
		}
		return
	}
	var missed []*enqueueCall
	for _, c := range calls {
		if j, ok := inserted[c.nj.ID]; ok {
			c.answer(j, false, nil)
		} else {
			missed = append(missed, c)
		}
	}
	if len(missed) == 0 {
		return
	}
	byKey, byID, err := s.conflicting(ctx, missed)
	if err != nil {
		for _, c := range missed {
			c.answer(store.Job{}, false, err)
		}
		return
	}
	for _, c := range missed {
		key := c.nj.IdempotencyKey
		if j, ok := byKey[key]; ok && key != "" {
			if j.RequestHash != c.nj.RequestHash {
				c.answer(j, true, store.ErrIdempotencyMismatch)
			} else {
				c.answer(j, true, nil)
			}
			continue
		}
		if _, ok := byID[c.nj.ID]; ok {
			c.answer(store.Job{}, false, fmt.Errorf("job %s: %w", c.nj.ID, store.ErrConflict))
			continue
		}
		// The row that stopped the insert was deleted before the lookup: insert again,
		// a bounded number of times.
		if c.tries++; c.tries >= 3 {
			c.answer(store.Job{}, false, fmt.Errorf("idempotency key %q: %w", key, store.ErrConflict))
		}
	}
}

// insertJobsSQL inserts a group of jobs and their "accepted" events in one statement.
// The jobs come as one array per column, in call order ($2 to $12, and their audit entries, $13 to $17), and go in in that
// order (WITH ORDINALITY), so that seq and the unique indexes see the calls as they
// came. A row that breaks a unique index (the id or the idempotency key, of a committed
// job, of one in flight, which the insert waits for, or of an earlier row of the group)
// is skipped and not returned; its event is not written.
const insertJobsSQL = `WITH j AS (
	INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at,
		idempotency_key, request_hash, notify_url, created_by, queue)
	SELECT id, kind, args::json, 'PENDING', priority, coalesce(run_at, ` + nowSQL + `), max_attempts, ` + nowSQL + `,
		key, hash, notify, created_by, queue
	FROM unnest($2::text[], $3::text[], $4::text[], $5::integer[], $6::timestamptz[], $7::integer[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
		WITH ORDINALITY AS t(id, kind, args, priority, run_at, max_attempts, key, hash, notify, created_by, queue, n)
	ORDER BY n
	ON CONFLICT DO NOTHING
	RETURNING ` + jobColumns + `
), e AS (
	INSERT INTO job_events (job_id, at, type, status, attempt, data)
	SELECT id, ` + nowSQL + `, 'accepted', 'PENDING', 0, NULL FROM j ORDER BY seq
), a AS (
	INSERT INTO audit_log (at, actor, action, job, report, ip, detail)
	SELECT ` + nowSQL + `, a.actor, a.action, j.id, a.report, a.ip, a.detail
	FROM j JOIN unnest($2::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[])
		AS a(id, actor, action, report, ip, detail) ON a.id = j.id
	WHERE a.actor IS NOT NULL
	ORDER BY j.seq
)
SELECT ` + jobColumns + ` FROM j`

// insertJobs runs insertJobsSQL for calls and returns the jobs it inserted by id. The
// rows are read to the end before anything is answered: the statement commits only
// when it completes.
func (s *Store) insertJobs(ctx context.Context, calls []*enqueueCall) (map[string]store.Job, error) {
	n := len(calls)
	var (
		ids, kinds, args, queues           = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prios, maxAttempts                 = make([]int32, n), make([]int32, n)
		runAts                             = make([]*time.Time, n)
		keys, hashes, notifies, createdBys = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	)
	// The jobs' audit entries (store.NewJob.Audit), in the same statement: a NULL actor
	// is a job without one.
	actors, actions, reports, ips, details := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	for i, c := range calls {
		nj := c.nj
		if e := nj.Audit; e != nil {
			actors[i], actions[i], reports[i], ips[i], details[i] = &e.Actor, &e.Action, &e.Report, &e.IP, &e.Detail
		}
		ids[i], kinds[i], args[i], queues[i] = nj.ID, nj.Kind, string(nj.Args), nj.Queue
		prios[i], maxAttempts[i] = int32(nj.Priority), int32(nj.MaxAttempts) // in range: the core checked it
		if !nj.RunAt.IsZero() {
			runAts[i] = &nj.RunAt
		}
		keys[i], hashes[i] = nullString(nj.IdempotencyKey), nullString(nj.RequestHash)
		notifies[i], createdBys[i] = nullString(nj.NotifyURL), nullString(nj.CreatedBy)
	}
	jobs, err := s.queryJobs(ctx, s.pool, insertJobsSQL, s.now(), ids, kinds, args, prios, runAts, maxAttempts,
		keys, hashes, notifies, createdBys, queues, actors, actions, reports, ips, details)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Job, len(jobs))
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

// conflicting reads the jobs that hold the keys and the ids of calls whose rows the
// insert skipped, by key and by id.
func (s *Store) conflicting(ctx context.Context, calls []*enqueueCall) (byKey, byID map[string]store.Job, err error) {
	var keys, ids []string
	for _, c := range calls {
		if c.nj.IdempotencyKey != "" {
			keys = append(keys, c.nj.IdempotencyKey)
		}
		ids = append(ids, c.nj.ID)
	}
	jobs, err := s.queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = ANY($1) OR id = ANY($2)`, keys, ids)
	if err != nil {
		return nil, nil, err
	}
	byKey, byID = map[string]store.Job{}, map[string]store.Job{}
	for _, j := range jobs {
		if j.IdempotencyKey != "" {
			byKey[j.IdempotencyKey] = j
		}
		byID[j.ID] = j
	}
	return byKey, byID, nil
}
