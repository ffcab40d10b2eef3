package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Status is a job's place in the state machine.
type Status string

// The job states (ARCHITECTURE.md, "State machine").
const (
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusSucceeded  Status = "SUCCEEDED"
	StatusFailed     Status = "FAILED"
	StatusCanceled   Status = "CANCELED"
	StatusExpired    Status = "EXPIRED"
)

// Final reports whether no further transition but expiry can happen.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled || s == StatusExpired
}

// Valid reports whether s is one of the known states.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusProcessing, StatusSucceeded, StatusFailed, StatusCanceled, StatusExpired:
		return true
	}
	return false
}

// Event types written to job_events.
const (
	EventAccepted          = "accepted"
	EventStarted           = "started"
	EventSucceeded         = "succeeded"
	EventAttemptFailed     = "attempt_failed" // will be retried
	EventFailed            = "failed"         // final
	EventRecovered         = "recovered"      // heartbeat lost; back to PENDING (or FAILED when out of attempts)
	EventCompletedFromFile = "completed_from_file"
	EventCancelRequested   = "cancel_requested"
	EventCanceled          = "canceled"
	EventRequeued          = "requeued" // shutdown; attempt not spent
)

// ErrIdempotencyMismatch is returned when an idempotency key is reused with another body.
var ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")

// ErrFinished is returned when an action needs an unfinished job.
var ErrFinished = errors.New("job already finished")

// Job is one row of the jobs table. Zero times mean "not yet".
type Job struct {
	ID          string
	Kind        string
	Args        json.RawMessage
	Status      Status
	Priority    int
	RunAt       time.Time
	Attempt     int
	MaxAttempts int
	// AttemptBase is the attempts spent before the last manual retry (Retry): the
	// retry backoff counts from it, so a run asked for by hand starts fresh, while
	// Attempt keeps growing for the fences (rule 4).
	AttemptBase     int
	Worker          string
	CreatedAt       time.Time
	StartedAt       time.Time
	HeartbeatAt     time.Time
	FinishedAt      time.Time
	ProgressRows    int64
	ProgressTotal   int64 // -1 when unknown
	CancelRequested bool
	ErrorCode       string
	ErrorMessage    string
	FileName        string
	FileSize        int64
	FileSHA256      string
	IdempotencyKey  string
	RequestHash     string
	// Warnings are what a successful attempt wants the user to know.
	Warnings []string
	// CreatedBy names the access token that created the job ("" when none).
	CreatedBy string
	// NotifyURL is NewJob.NotifyURL: opaque to the store, read by a follow-up hook.
	NotifyURL string
	// ParentID is the job whose end created this one (a FollowUp); "" for others.
	ParentID string
	// Queue is the lane the job runs in: only a claim for this queue takes it.
	Queue string
	// Seq is the job's place in insertion order (its rowid): List's order and cursor.
	Seq int64
}

// Event is one row of the append-only job_events log.
type Event struct {
	ID      int64
	JobID   string
	At      time.Time
	Type    string
	Status  Status
	Attempt int
	Data    json.RawMessage // nil when the event carries no details
}

const jobColumns = `id, kind, args, status, priority, run_at, attempt, max_attempts, worker,
	created_at, started_at, heartbeat_at, finished_at, progress_rows, progress_total,
	cancel_requested, error_code, error_message, file_name, file_size, file_sha256,
	idempotency_key, request_hash, warnings, created_by, webhook_url, parent_id, queue, attempt_base, rowid`

type scanner interface{ Scan(...any) error }

func scanJob(row scanner) (Job, error) {
	var (
		j                                       Job
		args                                    string
		runAt, createdAt                        int64
		started, heartbeat, finished, total     sql.NullInt64
		worker, code, msg, fname, fsha, key, rh sql.NullString
		fsize                                   sql.NullInt64
		cancel                                  int
		warnings, createdBy, notify, parent     sql.NullString
	)
	err := row.Scan(&j.ID, &j.Kind, &args, &j.Status, &j.Priority, &runAt, &j.Attempt, &j.MaxAttempts, &worker,
		&createdAt, &started, &heartbeat, &finished, &j.ProgressRows, &total,
		&cancel, &code, &msg, &fname, &fsize, &fsha, &key, &rh, &warnings, &createdBy, &notify, &parent, &j.Queue, &j.AttemptBase, &j.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNotFound
	}
	if err != nil {
		return Job{}, err
	}
	j.Args = json.RawMessage(args)
	j.RunAt = time.UnixMilli(runAt).UTC()
	j.CreatedAt = time.UnixMilli(createdAt).UTC()
	j.StartedAt, j.HeartbeatAt, j.FinishedAt = fromMS(started), fromMS(heartbeat), fromMS(finished)
	j.ProgressTotal = -1
	if total.Valid {
		j.ProgressTotal = total.Int64
	}
	j.Worker, j.ErrorCode, j.ErrorMessage = worker.String, code.String, msg.String
	j.FileName, j.FileSize, j.FileSHA256 = fname.String, fsize.Int64, fsha.String
	j.IdempotencyKey, j.RequestHash = key.String, rh.String
	j.CreatedBy, j.NotifyURL, j.ParentID = createdBy.String, notify.String, parent.String
	if warnings.Valid {
		if err := json.Unmarshal([]byte(warnings.String), &j.Warnings); err != nil {
			return Job{}, fmt.Errorf("job %s warnings: %w", j.ID, err)
		}
	}
	j.CancelRequested = cancel != 0
	return j, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// addEvent appends to job_events inside tx; every state change calls it (rule 10).
func (s *Store) addEvent(ctx context.Context, tx *sql.Tx, jobID, typ string, status Status, attempt int, data any) error {
	var payload sql.NullString
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("event data: %w", err)
		}
		payload = sql.NullString{String: string(b), Valid: true}
	}
	_, err := tx.StmtContext(ctx, s.insertEvent).ExecContext(ctx, jobID, ms(s.now()), typ, status, attempt, payload)
	if err != nil {
		return fmt.Errorf("add event %s: %w", typ, err)
	}
	return nil
}

const (
	insertEventSQL = `INSERT INTO job_events (job_id, at, type, status, attempt, data) VALUES (?, ?, ?, ?, ?, ?)`
	insertJobSQL   = `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts,
		created_at, idempotency_key, request_hash, webhook_url, created_by, queue) VALUES (?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// NewJob is what Enqueue needs to create a job.
type NewJob struct {
	ID          string // required; opaque and unguessable, chosen by the caller
	Kind        string
	Args        json.RawMessage
	Priority    int       // lower runs first
	RunAt       time.Time // zero: now
	MaxAttempts int       // zero: DefaultMaxAttempts
	// IdempotencyKey, when set, makes the insert happen at most once per key (rule 11);
	// RequestHash is compared to tell a replay from a reused key.
	IdempotencyKey string
	RequestHash    string
	// NotifyURL is an address the job's kind may notify when it ends (a webhook URL):
	// the store keeps it for the follow-up hook (Options.FollowUps) and never reads it.
	NotifyURL string
	// CreatedBy names the access token that asked for the job; "" stores NULL.
	CreatedBy string
	// Queue is the lane the job runs in; "" is DefaultQueue.
	Queue string
}

// DefaultQueue is the queue of a job or follow-up that names none: the exports lane.
const DefaultQueue = "exports"

// Enqueue inserts a PENDING job and its "accepted" event and returns it once committed.
// With an idempotency key that already has a job, it returns that job and existed=true,
// or ErrIdempotencyMismatch (with the existing job) when the request hash differs.
// Concurrent calls share one write transaction (group commit, store/batch.go); each
// call still returns only after the commit that holds its row.
func (s *Store) Enqueue(ctx context.Context, nj NewJob) (job Job, existed bool, err error) {
	if nj.ID == "" || nj.Kind == "" || len(nj.Args) == 0 {
		return Job{}, false, errors.New("enqueue: id, kind and args are required")
	}
	if s.unbatched {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			job, existed, err = s.enqueueTx(ctx, tx, nj)
			return err
		})
	} else {
		job, existed, err = s.batch.enqueue(ctx, nj)
	}
	if errors.Is(err, ErrIdempotencyMismatch) {
		return job, true, err
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("enqueue: %w", err)
	}
	return job, existed, nil
}

// enqueueTx is one Enqueue inside tx: the idempotency lookup, the job row and its event.
// On an error other than a refusal (refusedAlone) the caller must roll back the transaction.
func (s *Store) enqueueTx(ctx context.Context, tx *sql.Tx, nj NewJob) (job Job, existed bool, err error) {
	now := s.now()
	if nj.RunAt.IsZero() {
		nj.RunAt = now
	}
	if nj.MaxAttempts <= 0 {
		nj.MaxAttempts = DefaultMaxAttempts
	}
	// The insert goes first and the unique index on idempotency_key decides: a new key (the
	// common case) costs no lookup inside the write transaction. A key that has a job
	// already, committed or written earlier in this transaction (a group commit), makes
	// the insert fail, SQLite undoes that one statement, and the lookup below answers
	// with the job. BEGIN IMMEDIATE holds the write lock, so nothing comes in between.
	queue := cmp.Or(nj.Queue, DefaultQueue)
	res, err := tx.StmtContext(ctx, s.insertJob).ExecContext(ctx,
		nj.ID, nj.Kind, string(nj.Args), nj.Priority, ms(nj.RunAt), nj.MaxAttempts, ms(now),
		nullString(nj.IdempotencyKey), nullString(nj.RequestHash), nullString(nj.NotifyURL), nullString(nj.CreatedBy),
		queue)
	if err == nil {
		// The row is what was just written: a new PENDING job with the columns' defaults.
		// Building it here instead of RETURNING it spares SQLite a temporary table and
		// the scan (a third of an accept's statement time); TestEnqueueReturnsStoredJob
		// holds it to what Get reads back.
		job = Job{ID: nj.ID, Kind: nj.Kind, Args: slices.Clone(nj.Args), Status: StatusPending,
			Priority: nj.Priority, RunAt: time.UnixMilli(ms(nj.RunAt)).UTC(), MaxAttempts: nj.MaxAttempts,
			CreatedAt: time.UnixMilli(ms(now)).UTC(), ProgressTotal: -1,
			IdempotencyKey: nj.IdempotencyKey, RequestHash: nj.RequestHash, CreatedBy: nj.CreatedBy,
			NotifyURL: nj.NotifyURL, Queue: queue}
		job.Seq, err = res.LastInsertId()
	}
	if err != nil {
		if !isUnique(err) {
			return Job{}, false, err
		}
		if nj.IdempotencyKey != "" {
			j, err := scanJob(tx.StmtContext(ctx, s.batch.jobByKey).QueryRowContext(ctx, nj.IdempotencyKey))
			switch {
			case err == nil && j.RequestHash != nj.RequestHash:
				return j, true, ErrIdempotencyMismatch
			case err == nil:
				return j, true, nil
			case !errors.Is(err, ErrNotFound):
				return Job{}, false, err
			}
		}
		return Job{}, false, ErrConflict // the id, not the key
	}
	if err := s.addEvent(ctx, tx, job.ID, EventAccepted, StatusPending, 0, nil); err != nil {
		// The job row is written: whatever the error, the transaction must not commit.
		return Job{}, false, fmt.Errorf("%w: %w", errAfterInsert, err)
	}
	return job, false, nil
}

// errAfterInsert marks an Enqueue error that came after the job's row was written, so a
// group commit never mistakes it for a job refused alone.
var errAfterInsert = errors.New("after the job was written")

// fence is the WHERE clause every update of a running execution carries (rule 3).
const fence = ` WHERE id = ? AND attempt = ? AND status = 'PROCESSING'`

// Heartbeat stamps heartbeat_at and progress for a running attempt. It reports whether a
// cancel was requested, and returns ErrLeaseLost when the attempt no longer owns the job.
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error) {
	var cancel int
	err = s.tx(ctx, func(tx *sql.Tx) error {
		return tx.StmtContext(ctx, s.stmts.heartbeat).QueryRowContext(ctx, ms(s.now()), rows, nullTotal(total), id, attempt).Scan(&cancel)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return cancel != 0, nil
}

func nullTotal(total int64) sql.NullInt64 { return sql.NullInt64{Int64: total, Valid: total >= 0} }

// FileResult describes a published file.
type FileResult struct {
	Name     string
	Size     int64
	SHA256   string
	Rows     int64
	Warnings []string
}

// CompleteFromFile marks a running (orphaned) attempt SUCCEEDED from a file that was
// published before a crash, without running it again (rule 5).
func (s *Store) CompleteFromFile(ctx context.Context, id string, attempt int, res FileResult) (Job, error) {
	var job Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if job, err = s.finishTx(ctx, tx, id, attempt, StatusSucceeded, res); err != nil {
			return err
		}
		if err := s.addEvent(ctx, tx, id, EventCompletedFromFile, StatusSucceeded, attempt, fileData(res)); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
	})
	if err != nil {
		return Job{}, fmt.Errorf("complete %s from file: %w", id, err)
	}
	return job, nil
}

// finishTx ends a running attempt. A finished job's total is the rows it wrote, also
// when it ended before a heartbeat carried the total.
func (s *Store) finishTx(ctx context.Context, tx *sql.Tx, id string, attempt int, status Status, res FileResult) (Job, error) {
	now := ms(s.now())
	var warnings sql.NullString
	if len(res.Warnings) > 0 {
		b, err := json.Marshal(res.Warnings)
		if err != nil {
			return Job{}, err
		}
		warnings = sql.NullString{String: string(b), Valid: true}
	}
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.finish).QueryRowContext(ctx,
		status, now, now, res.Rows, res.Rows, res.Rows, res.Rows, nullString(res.Name), res.Size, nullString(res.SHA256), warnings, id, attempt))
	if errors.Is(err, ErrNotFound) {
		return Job{}, ErrLeaseLost
	}
	return job, err
}

// AttemptError is the outcome of a failed attempt.
type AttemptError struct {
	Code      string
	Message   string
	Permanent bool
}

// Recover takes back an attempt whose heartbeat was lost (a crash, a hung process) and
// puts the job back to PENDING to run retryIn from now (the store's clock); the lost
// attempt counts as spent, so a job that keeps crashing its worker ends FAILED after
// max_attempts. A job whose cancel was requested becomes CANCELED.
func (s *Store) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (Job, error) {
	var job Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		t := s.now()
		now, retryAt := ms(t), t.Add(max(retryIn, 0))
		var err error
		job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET
			status = CASE WHEN cancel_requested THEN 'CANCELED'
				WHEN attempt >= max_attempts THEN 'FAILED' ELSE 'PENDING' END,
			finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts THEN ? ELSE NULL END,
			run_at = ?, worker = NULL, error_code = 'lost', error_message = ?`+fence+` RETURNING `+jobColumns,
			now, ms(retryAt), reason, id, attempt))
		if errors.Is(err, ErrNotFound) {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		typ := EventRecovered
		switch job.Status {
		case StatusFailed:
			typ = EventFailed
		case StatusCanceled:
			typ = EventCanceled
		}
		if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, LostData{Code: "lost", Message: reason}); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
	})
	if err != nil {
		return Job{}, fmt.Errorf("recover %s: %w", id, err)
	}
	return job, nil
}

// Cancel cancels a job. A PENDING job becomes CANCELED at once; a PROCESSING job gets
// cancel_requested, which its worker sees through the engine or its next heartbeat.
// It returns ErrFinished for a job that already ended.
func (s *Store) Cancel(ctx context.Context, id string) (Job, error) {
	var job Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		switch job.Status {
		case StatusPending:
			job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET status = 'CANCELED', finished_at = ?
				WHERE id = ? AND status = 'PENDING' RETURNING `+jobColumns, ms(s.now()), id))
			if err != nil {
				return err
			}
			if err := s.addEvent(ctx, tx, id, EventCanceled, StatusCanceled, job.Attempt, nil); err != nil {
				return err
			}
			return s.followUpsTx(ctx, tx, job)
		case StatusProcessing:
			if job.CancelRequested {
				return nil
			}
			job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET cancel_requested = 1
				WHERE id = ? AND status = 'PROCESSING' RETURNING `+jobColumns, id))
			if err != nil {
				return err
			}
			return s.addEvent(ctx, tx, id, EventCancelRequested, StatusProcessing, job.Attempt, nil)
		default:
			return ErrFinished
		}
	})
	if err != nil {
		return job, fmt.Errorf("cancel %s: %w", id, err)
	}
	return job, nil
}

// Stale returns PROCESSING jobs whose heartbeat is older than staleAfter by the store's
// clock, oldest heartbeat first; staleAfter <= 0 returns every PROCESSING job (the
// startup sweep, when all of them are orphans).
func (s *Store) Stale(ctx context.Context, staleAfter time.Duration) ([]Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE status = 'PROCESSING'`
	var args []any
	if staleAfter > 0 {
		q += ` AND heartbeat_at < ?`
		args = append(args, ms(s.now().Add(-staleAfter)))
	}
	return s.queryJobs(ctx, s.w, q+` ORDER BY heartbeat_at`, args...)
}

// NextRunIn returns how long until the earliest run_at among PENDING jobs of queue, by
// the store's clock (zero or less when one is runnable now), or ErrNotFound when the
// queue has no PENDING job. The engine asks each lane about its own queue only, so a full
// lane's due job does not make another lane's dispatcher spin.
func (s *Store) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT min(run_at) FROM jobs WHERE status = 'PENDING' AND queue = ?`, queue).Scan(&v); err != nil {
		return 0, fmt.Errorf("next run_at: %w", err)
	}
	if !v.Valid {
		return 0, ErrNotFound
	}
	return time.UnixMilli(v.Int64).Sub(s.now()), nil
}

// Get returns one job.
func (s *Store) Get(ctx context.Context, id string) (Job, error) {
	j, err := scanJob(s.reads.get.QueryRowContext(ctx, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// ListOptions filters List.
type ListOptions struct {
	Status Status // empty: any
	Kind   string // empty: any
	// Report keeps jobs whose args name this report ($.report); empty: any.
	Report string
	Limit  int // default 50, at most 1000
	// Before lists the jobs inserted before the one whose Seq it is: the cursor; 0 starts
	// at the newest.
	Before int64
}

// List returns jobs newest first, in insertion order.
//
// No listing index is written when a job is accepted (migration 0006): the table's
// rowid order is the listing order, PENDING jobs are found through jobs_claim, and the
// others through the partial indexes jobs_settled_status and jobs_settled_report, which
// end in the rowid and so read newest first. INDEXED BY pins each part to its index: a
// plan that scanned the table for a few old PENDING retries could read all of it.
func (s *Store) List(ctx context.Context, o ListOptions) ([]Job, error) {
	q, args := listQuery(o)
	return s.queryJobs(ctx, s.r, q, args...)
}

// listQuery is List's statement and its arguments.
func listQuery(o ListOptions) (string, []any) {
	if o.Limit <= 0 {
		o.Limit = 50
	}
	o.Limit = min(o.Limit, 1000)
	var where []string
	var args []any
	if o.Kind != "" {
		where = append(where, `kind = ?`)
		args = append(args, o.Kind)
	}
	if o.Report != "" {
		// The same expression as the jobs_settled_report index, so the planner uses it.
		where = append(where, `json_extract(args, '$.report') = ?`)
		args = append(args, o.Report)
	}
	if o.Before > 0 {
		where = append(where, `rowid < ?`)
		args = append(args, o.Before)
	}
	// part selects the newest jobs that match where and extra, through index ("" for the
	// table itself), with its arguments.
	part := func(index string, extra ...string) (string, []any) {
		q := `SELECT ` + jobColumns + ` FROM jobs`
		if index != "" {
			q += ` INDEXED BY ` + index
		}
		if w := append(slices.Clone(where), extra...); len(w) > 0 {
			q += ` WHERE ` + strings.Join(w, ` AND `)
		}
		return q + ` ORDER BY rowid DESC LIMIT ?`, append(slices.Clone(args), o.Limit)
	}
	// The partial indexes hold no PENDING job, so a query that uses one says so.
	const settled = `status <> 'PENDING'`
	var q string
	switch {
	case o.Status == StatusPending:
		q, args = part("jobs_claim", `status = 'PENDING'`)
	case o.Status != "":
		index := "jobs_settled_status"
		if o.Report != "" {
			index = "jobs_settled_report"
		}
		q, args = part(index, `status = ?`, settled)
		// status = ? comes after the shared conditions; its argument goes before the limit.
		args = slices.Insert(args, len(args)-1, any(o.Status))
	case o.Report != "":
		// Any status, one report: the newest PENDING and the newest settled jobs of the
		// report, each at most a page, merged. seq is the last column (rowid).
		pq, pa := part("jobs_claim", `status = 'PENDING'`)
		sq, sa := part("jobs_settled_report", settled)
		q = `SELECT * FROM (` + pq + `) UNION ALL SELECT * FROM (` + sq + `) ORDER BY ` +
			strconv.Itoa(strings.Count(jobColumns, ",")+1) + ` DESC LIMIT ?`
		args = append(append(pa, sa...), o.Limit)
	default:
		q, args = part("")
	}
	return q, args
}

// Counts returns the number of jobs in each state, follow-up jobs (webhook deliveries)
// left out.
func (s *Store) Counts(ctx context.Context) (map[Status]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM jobs WHERE parent_id IS NULL GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[Status]int{}
	for rows.Next() {
		var st Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[st] = n
	}
	return out, rows.Err()
}

func (s *Store) queryJobs(ctx context.Context, db *sql.DB, q string, args ...any) ([]Job, error) {
	return scanJobs(db.QueryContext(ctx, q, args...))
}

// scanJobs reads every job of a query's rows (err: the query's own error).
func scanJobs(rows *sql.Rows, err error) ([]Job, error) {
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Events returns a job's events in order.
func (s *Store) Events(ctx context.Context, jobID string) ([]Event, error) {
	return s.queryEvents(ctx, s.reads.jobEvents, jobID)
}

// getTx reads a job inside a write transaction, so that the check that follows and the
// update it guards see the same row.
func getTx(ctx context.Context, tx *sql.Tx, id string) (Job, error) {
	return scanJob(tx.QueryRowContext(ctx, getSQL, id))
}
