package pg

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"sheetq/store"
)

// The reads the API and the pages make of the job table beyond the engine's (jobs.Store),
// with the meaning of the SQLite store's methods of the same names; the conformance suite
// runs the same assertions on both (conformance.RunReads).

// List returns jobs newest first, in insertion order (seq): store.ListOptions filters them
// by state, kind, report and creator, and Before (a Job.Seq) pages back from a job. The limit is 50
// when not set, at most 1000. A status that is no state lists nothing.
//
// Each shape reads an index of migration 0004 (pg.TestListPlans): the whole table through
// jobs_seq; a final state, or a report's final jobs, through jobs_final_status and
// jobs_final_report; the unfinished jobs through jobs_claim and jobs_running.
//
// Seq values are taken in the order transactions ask for them, not the order they commit:
// a job that commits after a page was read, with a seq above that page's last, is not on
// the pages after it. Paging back never repeats a job, and a fresh listing shows it.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.Job, error) {
	q, args, ok := listQuery(o)
	if !ok {
		return nil, nil
	}
	jobs, err := s.queryJobs(ctx, s.pool, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// final is the set of final states, as the partial indexes of migrations 0001 and 0004
// spell it.
const final = `status IN ('SUCCEEDED','FAILED','CANCELED','EXPIRED')`

// listQuery is List's statement and its arguments; ok is false when nothing can match.
func listQuery(o store.ListOptions) (q string, args []any, ok bool) {
	if o.Status != "" && !o.Status.Valid() || hasNUL(o.Kind, o.Report, o.CreatedBy) {
		return "", nil, false
	}
	limit := o.Limit
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var where []string
	if o.Kind != "" {
		where = append(where, `kind = `+arg(o.Kind))
	}
	if o.Report != "" {
		where = append(where, `args ->> 'report' = `+arg(o.Report))
	}
	if o.CreatedBy != "" {
		where = append(where, `created_by = `+arg(o.CreatedBy))
	}
	if o.Before > 0 {
		where = append(where, `seq < `+arg(o.Before))
	}
	lim := arg(limit)
	// part selects the newest jobs that match where and extra, by order.
	part := func(order string, extra ...string) string {
		q := `SELECT ` + jobColumns + ` FROM jobs`
		if w := append(where[:len(where):len(where)], extra...); len(w) > 0 {
			q += ` WHERE ` + strings.Join(w, ` AND `)
		}
		return q + ` ORDER BY ` + order + ` DESC LIMIT ` + lim
	}
	// The unfinished jobs are ordered by an expression of seq, which no index holds:
	// read in jobs_seq's order, a listing of a few old PENDING retries would walk the
	// whole table to find them. So they are found through jobs_claim and jobs_running,
	// and sorted: the backlog at most.
	const unfinishedOrder = `seq + 0`
	// A state is written as a literal from a known set, not a parameter: a generic plan
	// could not prove that "status = $n" implies a partial index's predicate.
	switch {
	case o.Status.Final():
		q = part(`seq`, `status = '`+string(o.Status)+`'`, final)
	case o.Status != "":
		q = part(unfinishedOrder, `status = '`+string(o.Status)+`'`)
	case o.Report != "" || o.CreatedBy != "":
		// Any state, one report or one person's: the newest finished jobs through
		// jobs_final_report or jobs_final_created_by (migration 0012), and the newest
		// unfinished ones, each at most a page, merged.
		q = `(` + part(`seq`, final) + `) UNION ALL (` +
			part(unfinishedOrder, `(status = 'PENDING' OR status = 'PROCESSING')`) +
			`) ORDER BY seq DESC LIMIT ` + lim
	default:
		q = part(`seq`)
	}
	return q, args, true
}

// Counts returns the number of jobs in each state, follow-up jobs (webhook deliveries)
// left out. A state without jobs is absent.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int, error) {
	out := map[store.Status]int{}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM jobs WHERE parent_id IS NULL GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[store.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}

// JobsByID returns the jobs with the given ids that exist, keyed by id.
func (s *Store) JobsByID(ctx context.Context, ids []string) (map[string]store.Job, error) {
	out := make(map[string]store.Job, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	jobs, err := s.queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs WHERE id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

// Unfinished returns every PENDING or PROCESSING job, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]store.Job, error) {
	jobs, err := s.queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs
		WHERE status = 'PENDING' OR status = 'PROCESSING' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished jobs: %w", err)
	}
	return jobs, nil
}

// PendingHead is store.Store.PendingHead: jobs_claim (queue, priority, run_at, seq) read
// in order.
func (s *Store) PendingHead(ctx context.Context, queue, kind string, limit int) ([]store.Job, error) {
	jobs, err := s.queryJobs(ctx, s.pool, pendingHeadQuery, queue, kind, min(max(limit, 1), 1000))
	if err != nil {
		return nil, fmt.Errorf("pending head of %s: %w", queue, err)
	}
	return jobs, nil
}

// pendingHeadQuery is PendingHead's statement.
const pendingHeadQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE status = 'PENDING' AND queue = $1 AND kind = $2 ORDER BY priority, run_at, seq LIMIT $3`

// PendingByQueue counts the PENDING jobs of each queue that has any, runnable or not.
// jobs_claim starts with the queue and holds only PENDING jobs, so this reads that
// index alone.
func (s *Store) PendingByQueue(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	rows, err := s.pool.Query(ctx, `SELECT queue, count(*) FROM jobs WHERE status = 'PENDING' GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("pending by queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("pending by queue: %w", err)
		}
		out[q] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending by queue: %w", err)
	}
	return out, nil
}
