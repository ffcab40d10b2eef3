package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sheetq/store"
	"slices"
	"strconv"
	"strings"
	"time"
)

const jobColumns = `id, kind, args, status, priority, run_at, attempt, max_attempts, worker,
	created_at, started_at, heartbeat_at, finished_at, progress_rows, progress_total,
	cancel_requested, error_code, error_message, file_name, file_size, file_sha256,
	idempotency_key, request_hash, warnings, created_by, webhook_url, parent_id, queue, attempt_base, rowid`

type scanner interface{ Scan(...any) error }

func scanJob(row scanner) (store.Job, error) {
	var (
		j                                       store.Job
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
		return store.Job{}, store.ErrNotFound
	}
	if err != nil {
		return store.Job{}, err
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
			return store.Job{}, fmt.Errorf("job %s warnings: %w", j.ID, err)
		}
	}
	j.CancelRequested = cancel != 0
	return j, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// addEvent appends to job_events inside tx; every state change calls it (rule 10).
func (s *Store) addEvent(ctx context.Context, tx *sql.Tx, jobID, typ string, status store.Status, attempt int, data any) error {
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

// enqueueTx is one Enqueue inside tx: the idempotency lookup, the job row and its event.
// On an error other than a refusal (refusedAlone) the caller must roll back the transaction.
func (s *Store) enqueueTx(ctx context.Context, tx *sql.Tx, nj store.NewJob) (job store.Job, existed bool, err error) {
	now := s.now()
	if nj.RunAt.IsZero() {
		nj.RunAt = now
	}
	// The insert goes first and the unique index on idempotency_key decides: a new key (the
	// common case) costs no lookup inside the write transaction. A key that has a job
	// already, committed or written earlier in this transaction (a group commit), makes
	// the insert fail, SQLite undoes that one statement, and the lookup below answers
	// with the job. BEGIN IMMEDIATE holds the write lock, so nothing comes in between.
	queue := nj.Queue
	res, err := tx.StmtContext(ctx, s.insertJob).ExecContext(ctx,
		nj.ID, nj.Kind, string(nj.Args), nj.Priority, ms(nj.RunAt), nj.MaxAttempts, ms(now),
		nullString(nj.IdempotencyKey), nullString(nj.RequestHash), nullString(nj.NotifyURL), nullString(nj.CreatedBy),
		queue)
	if err == nil {
		// The row is what was just written: a new PENDING job with the columns' defaults.
		// Building it here instead of RETURNING it spares SQLite a temporary table and
		// the scan (a third of an accept's statement time); TestWritesReturnTheStoredJob
		// holds it to what Get reads back.
		job = store.Job{ID: nj.ID, Kind: nj.Kind, Args: slices.Clone(nj.Args), Status: store.StatusPending,
			Priority: nj.Priority, RunAt: time.UnixMilli(ms(nj.RunAt)).UTC(), MaxAttempts: nj.MaxAttempts,
			CreatedAt: time.UnixMilli(ms(now)).UTC(), ProgressTotal: -1,
			IdempotencyKey: nj.IdempotencyKey, RequestHash: nj.RequestHash, CreatedBy: nj.CreatedBy,
			NotifyURL: nj.NotifyURL, Queue: queue}
		job.Seq, err = res.LastInsertId()
	}
	if err != nil {
		if !isUnique(err) {
			return store.Job{}, false, err
		}
		if nj.IdempotencyKey != "" {
			j, err := scanJob(tx.StmtContext(ctx, s.jobByKey).QueryRowContext(ctx, nj.IdempotencyKey))
			switch {
			case err == nil && j.RequestHash != nj.RequestHash:
				return j, true, store.ErrIdempotencyMismatch
			case err == nil:
				return j, true, nil
			case !errors.Is(err, store.ErrNotFound):
				return store.Job{}, false, err
			}
		}
		return store.Job{}, false, store.ErrConflict // the id, not the key
	}
	if err := s.addEvent(ctx, tx, job.ID, store.EventAccepted, store.StatusPending, 0, nil); err != nil {
		// The job row is written: whatever the error, the transaction must not commit.
		return store.Job{}, false, fmt.Errorf("%w: %w", errAfterInsert, err)
	}
	if e := nj.Audit; e != nil {
		// The request's audit entry, in the job's transaction (store.NewJob.Audit).
		if _, err := tx.StmtContext(ctx, s.insertAudit).ExecContext(ctx, ms(now), e.Actor, e.Action, job.ID, e.Report, e.IP, e.Detail); err != nil {
			return store.Job{}, false, fmt.Errorf("%w: %w: %w", errAfterInsert, store.ErrAuditNotWritten, err)
		}
	}
	return job, false, nil
}

const insertAuditSQL = `INSERT INTO audit_log (at, actor, action, job, report, ip, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`

// errAfterInsert marks an Enqueue error that came after the job's row was written, so a
// group commit never mistakes it for a job refused alone.
var errAfterInsert = errors.New("after the job was written")

// fence is the WHERE clause every update of a running execution carries (rule 3).
const fence = ` WHERE id = ? AND attempt = ? AND status = 'PROCESSING'`

// Heartbeat stamps heartbeat_at and progress for a running attempt. It reports whether a
// cancel was requested, and returns ErrLeaseLost when the attempt no longer owns the job.
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error) {
	var cancel int
	err = s.writeStep(ctx, func(ctx context.Context, tx *sql.Tx, _ *txState) error {
		return tx.StmtContext(ctx, s.stmts.heartbeat).QueryRowContext(ctx, ms(s.now()), rows, nullTotal(total), id, attempt).Scan(&cancel)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, store.ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return cancel != 0, nil
}

// SaveCheckpoint is Heartbeat that also replaces the job's checkpoint (nil clears it).
func (s *Store) SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error) {
	var cancel int
	err = s.writeStep(ctx, func(ctx context.Context, tx *sql.Tx, _ *txState) error {
		return tx.StmtContext(ctx, s.stmts.checkpoint).QueryRowContext(ctx, ms(s.now()), rows, nullTotal(total), data, id, attempt).Scan(&cancel)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, store.ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	return cancel != 0, nil
}

// Checkpoint reads the job's checkpoint (nil: none).
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, `SELECT checkpoint FROM jobs WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return data, nil
}

func nullTotal(total int64) sql.NullInt64 { return sql.NullInt64{Int64: total, Valid: total >= 0} }

// CompleteFromFile marks a running (orphaned) attempt SUCCEEDED from a file that was
// published before a crash, without running it again (rule 5).
func (s *Store) CompleteFromFile(ctx context.Context, id string, attempt int, res store.FileResult) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if job, err = s.finishTx(ctx, tx, id, attempt, store.StatusSucceeded, res); err != nil {
			return err
		}
		if err := s.addEvent(ctx, tx, id, store.EventCompletedFromFile, store.StatusSucceeded, attempt, store.FileDataOf(res)); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("complete %s from file: %w", id, err)
	}
	return job, nil
}

// finishTx ends a running attempt. A finished job's total is the rows it wrote, also
// when it ended before a heartbeat carried the total.
//
// It reads the row by id and updates it by rowid, still fenced (rule 3), instead of one
// UPDATE ... RETURNING: RETURNING made SQLite build and drop a temporary table inside
// the writer's critical section at every end. tx holds the one writer, so nothing comes
// between the read and the update. The job returned is the row as read with the end's
// changes applied; TestWritesReturnTheStoredJob holds it to what Get reads back.
func (s *Store) finishTx(ctx context.Context, tx *sql.Tx, id string, attempt int, status store.Status, res store.FileResult) (store.Job, error) {
	now := ms(s.now())
	var warnings sql.NullString
	if len(res.Warnings) > 0 {
		b, err := json.Marshal(res.Warnings)
		if err != nil {
			return store.Job{}, err
		}
		warnings = sql.NullString{String: string(b), Valid: true}
	}
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.byID).QueryRowContext(ctx, id))
	if errors.Is(err, store.ErrNotFound) || err == nil && (job.Attempt != attempt || job.Status != store.StatusProcessing) {
		return store.Job{}, store.ErrLeaseLost
	}
	if err != nil {
		return store.Job{}, err
	}
	r, err := tx.StmtContext(ctx, s.stmts.finish).ExecContext(ctx,
		status, now, now, res.Rows, res.Rows, res.Rows, res.Rows, nullString(res.Name), res.Size, nullString(res.SHA256), warnings, job.Seq, attempt)
	if err != nil {
		return store.Job{}, err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return store.Job{}, cmp.Or(err, store.ErrLeaseLost)
	}
	at := time.UnixMilli(now).UTC()
	job.Status, job.FinishedAt, job.HeartbeatAt, job.Worker = status, at, at, ""
	if res.Rows > 0 {
		job.ProgressRows, job.ProgressTotal = res.Rows, res.Rows
	}
	job.FileName, job.FileSize, job.FileSHA256 = res.Name, res.Size, res.SHA256
	job.Warnings = nil
	if warnings.Valid {
		if err := json.Unmarshal([]byte(warnings.String), &job.Warnings); err != nil {
			return store.Job{}, err
		}
	}
	return job, nil
}

// Recover takes back an attempt whose heartbeat was lost (a crash, a hung process) and
// puts the job back to PENDING to run retryIn from now (the store's clock); the lost
// attempt counts as spent, so a job that keeps crashing its worker ends FAILED after
// max_attempts. A job whose cancel was requested becomes CANCELED.
func (s *Store) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		t := s.now()
		now, retryAt := ms(t), t.Add(max(retryIn, 0))
		var err error
		// An attempt that saved a checkpoint made progress the next one keeps: it does not
		// spend the budget (rule 30), so that crashes cost an hour-long export minutes and
		// not its attempts. One that crashes before its first checkpoint does.
		job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET
			status = CASE WHEN cancel_requested THEN 'CANCELED'
				WHEN attempt >= max_attempts AND checkpoint_attempt IS NOT attempt THEN 'FAILED' ELSE 'PENDING' END,
			finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts AND checkpoint_attempt IS NOT attempt THEN ? ELSE NULL END,
			max_attempts = CASE WHEN checkpoint_attempt IS attempt THEN max_attempts + 1 ELSE max_attempts END,
			run_at = ?, worker = NULL, error_code = 'lost', error_message = ?`+fence+` RETURNING `+jobColumns,
			now, ms(retryAt), reason, id, attempt))
		if errors.Is(err, store.ErrNotFound) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		typ := store.RecoveredEvent(job.Status)
		if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, store.LostData{Code: "lost", Message: reason}); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("recover %s: %w", id, err)
	}
	return job, nil
}

// Cancel cancels a job. A PENDING job becomes CANCELED at once; a PROCESSING job gets
// cancel_requested, which its worker sees through the engine or its next heartbeat.
// It returns ErrFinished for a job that already ended.
func (s *Store) Cancel(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		step, err := store.CancelStepOf(job)
		switch step {
		case store.CancelNow:
			job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET status = 'CANCELED', finished_at = ?
				WHERE id = ? AND status = 'PENDING' RETURNING `+jobColumns, ms(s.now()), id))
			if err != nil {
				return err
			}
			if err := s.addEvent(ctx, tx, id, store.EventCanceled, store.StatusCanceled, job.Attempt, nil); err != nil {
				return err
			}
			return s.followUpsTx(ctx, tx, job)
		case store.CancelRequest:
			job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET cancel_requested = 1
				WHERE id = ? AND status = 'PROCESSING' RETURNING `+jobColumns, id))
			if err != nil {
				return err
			}
			return s.addEvent(ctx, tx, id, store.EventCancelRequested, store.StatusProcessing, job.Attempt, nil)
		}
		return err // nil (nothing to write) or store.ErrFinished
	})
	if err != nil {
		return job, fmt.Errorf("cancel %s: %w", id, err)
	}
	return job, nil
}

// Stale returns PROCESSING jobs whose heartbeat is older than staleAfter by the store's
// clock, oldest heartbeat first; staleAfter <= 0 returns every PROCESSING job (the
// startup sweep, when all of them are orphans).
func (s *Store) Stale(ctx context.Context, staleAfter time.Duration) ([]store.Job, error) {
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
	if err := s.reads.nextRun.QueryRowContext(ctx, queue).Scan(&v); err != nil {
		return 0, fmt.Errorf("next run_at: %w", err)
	}
	if !v.Valid {
		return 0, store.ErrNotFound
	}
	return time.UnixMilli(v.Int64).Sub(s.now()), nil
}

// Get returns one job.
func (s *Store) Get(ctx context.Context, id string) (store.Job, error) {
	j, err := scanJob(s.reads.get.QueryRowContext(ctx, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// List returns jobs newest first, in insertion order.
//
// No listing index is written when a job is accepted (migration 0006): the table's
// rowid order is the listing order, PENDING jobs are found through jobs_claim, and the
// others through the partial indexes jobs_settled_status, jobs_settled_report and
// jobs_settled_created_by (migration 0013), which
// end in the rowid and so read newest first. INDEXED BY pins each part to its index: a
// plan that scanned the table for a few old PENDING retries could read all of it.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.Job, error) {
	q, args := listQuery(o)
	return s.queryJobs(ctx, s.r, q, args...)
}

// listQuery is List's statement and its arguments.
func listQuery(o store.ListOptions) (string, []any) {
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
	if o.CreatedBy != "" {
		where = append(where, `created_by = ?`)
		args = append(args, o.CreatedBy)
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
	// The partial indexes of ended jobs hold no PENDING or PROCESSING job (migration
	// 0015), so a query that uses one says so, in the index's own two terms. Running
	// jobs, as few as the workers, are read through jobs_running and sorted.
	const settled = `status <> 'PENDING' AND status <> 'PROCESSING'`
	var q string
	switch {
	case o.Status == store.StatusPending:
		q, args = part("jobs_claim", `status = 'PENDING'`)
	case o.Status == store.StatusProcessing:
		q, args = part("jobs_running", `status = 'PROCESSING'`)
	case o.Status != "":
		index := "jobs_settled_status"
		switch {
		case o.CreatedBy != "":
			// One person's jobs are few beside everyone's: their index, then the state.
			index = "jobs_settled_created_by"
		case o.Report != "":
			index = "jobs_settled_report"
		}
		q, args = part(index, `status = ?`, settled)
		// status = ? comes after the shared conditions; its argument goes before the limit.
		args = slices.Insert(args, len(args)-1, any(o.Status))
	case o.Report != "" || o.CreatedBy != "":
		// Any status, one report or one person's: the newest PENDING, running and ended
		// jobs, each at most a page, merged. seq is the last column (rowid).
		index := "jobs_settled_report"
		if o.CreatedBy != "" {
			index = "jobs_settled_created_by"
		}
		pq, pa := part("jobs_claim", `status = 'PENDING'`)
		rq, ra := part("jobs_running", `status = 'PROCESSING'`)
		sq, sa := part(index, settled)
		q = `SELECT * FROM (` + pq + `) UNION ALL SELECT * FROM (` + rq + `) UNION ALL SELECT * FROM (` + sq + `) ORDER BY ` +
			strconv.Itoa(strings.Count(jobColumns, ",")+1) + ` DESC LIMIT ?`
		args = append(append(append(pa, ra...), sa...), o.Limit)
	default:
		q, args = part("")
	}
	return q, args
}

// Counts returns the number of jobs in each state, follow-up jobs (webhook deliveries)
// left out.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM jobs WHERE parent_id IS NULL GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[store.Status]int{}
	for rows.Next() {
		var st store.Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[st] = n
	}
	return out, rows.Err()
}

func (s *Store) queryJobs(ctx context.Context, db *sql.DB, q string, args ...any) ([]store.Job, error) {
	return scanJobs(db.QueryContext(ctx, q, args...))
}

// scanJobs reads every job of a query's rows (err: the query's own error).
func scanJobs(rows *sql.Rows, err error) ([]store.Job, error) {
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []store.Job
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
func (s *Store) Events(ctx context.Context, jobID string) ([]store.Event, error) {
	return s.queryEvents(ctx, s.reads.jobEvents, jobID)
}

// getTx reads a job inside a write transaction, so that the check that follows and the
// update it guards see the same row.
func getTx(ctx context.Context, tx *sql.Tx, id string) (store.Job, error) {
	return scanJob(tx.QueryRowContext(ctx, getSQL, id))
}
