// Package mysqlcopy moves a stopped SQLite job store into an empty MySQL or MariaDB one
// (`sheetq store copy --to mysql://...`), as store/pgcopy does for PostgreSQL: it reads
// the same source, uploads the files the same way (pgcopy.CopyFiles), and writes every
// row in one transaction.
package mysqlcopy

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/pgcopy"
)

// ErrNotEmpty is returned when the target database already holds jobs, events,
// schedules or audit entries: a copy into it would mix two queues' ids and keys.
var ErrNotEmpty = errors.New("the target MySQL store is not empty")

// pageSize is how many jobs one List reads (its maximum), and how many rows one INSERT
// carries.
const pageSize = 1000

// eventPage is how many events one EventsAfter reads: its maximum.
const eventPage = 10_000

// Copy copies src into the MySQL or MariaDB database dsn (migrated first, as a node
// does at start), which must be empty.
//
// The files go first (pgcopy.CopyFiles): a failure there leaves the database untouched.
// Then one transaction takes the event clock's row lock (store/mysql/events.go: no
// event is inserted without it, so a node started early waits rather than slip events
// between the copied ones), checks again that the target is empty, and inserts every
// job, event, schedule and audit entry with its seq or id kept: AUTO_INCREMENT moves
// past the largest value an insert names, so new rows follow the copied ones. A failure
// anywhere rolls the whole transaction back. Event ids are kept, so a client's SSE
// cursor from the SQLite node resumes on the new store.
//
// Jobs are copied as they are, PROCESSING ones too: a node's stale sweep recovers them.
func Copy(ctx context.Context, src pgcopy.Source, dsn string, opts pgcopy.Options) (pgcopy.Result, error) {
	var res pgcopy.Result
	st, err := mysql.OpenDriver(ctx, dsn, mysql.Options{MaxConns: 2})
	if err != nil {
		return res, err
	}
	defer st.Close()
	db := st.DB()
	if err := checkEmpty(ctx, db); err != nil {
		return res, err
	}
	if opts.Bucket != nil {
		if err := pgcopy.CopyFiles(ctx, src, opts, &res); err != nil {
			return res, err
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return res, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT n FROM event_clock WHERE one = 1 FOR UPDATE`); err != nil {
		return res, fmt.Errorf("lock the event clock: %w", err)
	}
	if err := checkEmpty(ctx, tx); err != nil {
		return res, err
	}
	if res.Jobs, err = copyJobs(ctx, tx, src, opts); err != nil {
		return pgcopy.Result{}, fmt.Errorf("copy jobs: %w", err)
	}
	if res.Events, err = copyEvents(ctx, tx, src); err != nil {
		return pgcopy.Result{}, fmt.Errorf("copy events: %w", err)
	}
	if res.Schedules, err = copySchedules(ctx, tx, src); err != nil {
		return pgcopy.Result{}, fmt.Errorf("copy schedules: %w", err)
	}
	if res.Audit, err = copyAudit(ctx, tx, src); err != nil {
		return pgcopy.Result{}, fmt.Errorf("copy the audit log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return pgcopy.Result{}, err
	}
	return res, nil
}

// querier is the pool or the transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// checkEmpty refuses a target that holds anything a copy would mix with.
func checkEmpty(ctx context.Context, q querier) error {
	var jobs, events, schedules, audit bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs), EXISTS (SELECT 1 FROM job_events),
		EXISTS (SELECT 1 FROM schedules), EXISTS (SELECT 1 FROM audit_log)`).Scan(&jobs, &events, &schedules, &audit)
	switch {
	case err != nil:
		return fmt.Errorf("look at the target: %w", err)
	case jobs || events || schedules || audit:
		return ErrNotEmpty
	}
	return nil
}

// insertRows inserts rows (each of len(columns) values) into table, pageSize a statement.
func insertRows(ctx context.Context, q querier, table string, columns []string, rows [][]any) error {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(columns)), ", ") + ")"
	for len(rows) > 0 {
		n := min(len(rows), pageSize)
		var b strings.Builder
		b.WriteString("INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES ")
		args := make([]any, 0, n*len(columns))
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(one)
			args = append(args, r...)
		}
		if _, err := q.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

var jobColumns = []string{"id", "seq", "kind", "args", "status", "queue", "priority", "run_at", "attempt",
	"max_attempts", "worker", "created_at", "started_at", "heartbeat_at", "finished_at", "progress_rows",
	"progress_total", "cancel_requested", "error_code", "error_message", "file_name", "file_size",
	"file_sha256", "idempotency_key", "request_hash", "warnings", "created_by", "notify_url", "parent_id", "attempt_base"}

// copyJobs inserts every job of src, a page at a time; with a bucket, a job's file name
// becomes its key there.
func copyJobs(ctx context.Context, q querier, src pgcopy.Source, opts pgcopy.Options) (int64, error) {
	var n, before int64
	for {
		page, err := src.List(ctx, store.ListOptions{Limit: pageSize, Before: before})
		if err != nil || len(page) == 0 {
			return n, err
		}
		rows := make([][]any, 0, len(page))
		for _, j := range page {
			if opts.Bucket != nil && j.FileName != "" {
				j.FileName = opts.Key(j.ID, j.Attempt, j.FileName)
			}
			r, err := jobRow(j)
			if err != nil {
				return n, err
			}
			rows = append(rows, r)
		}
		if err := insertRows(ctx, q, "jobs", jobColumns, rows); err != nil {
			return n, err
		}
		n += int64(len(page))
		before = page[len(page)-1].Seq
	}
}

// jobRow is j's values in jobColumns' order.
func jobRow(j store.Job) ([]any, error) {
	var warnings any
	if j.Warnings != nil {
		b, err := json.Marshal(j.Warnings)
		if err != nil {
			return nil, fmt.Errorf("job %s warnings: %w", j.ID, err)
		}
		warnings = string(b)
	}
	var total, size any
	if j.ProgressTotal >= 0 {
		total = j.ProgressTotal
	}
	if j.FileName != "" || j.FileSize != 0 {
		size = j.FileSize
	}
	return []any{j.ID, j.Seq, j.Kind, string(j.Args), string(j.Status), j.Queue, j.Priority, j.RunAt, j.Attempt,
		j.MaxAttempts, null(j.Worker), j.CreatedAt, nullTime(j.StartedAt), nullTime(j.HeartbeatAt), nullTime(j.FinishedAt), j.ProgressRows,
		total, j.CancelRequested, null(j.ErrorCode), null(j.ErrorMessage), null(j.FileName), size,
		null(j.FileSHA256), null(j.IdempotencyKey), null(j.RequestHash), warnings, null(j.CreatedBy), null(j.NotifyURL), null(j.ParentID), j.AttemptBase}, nil
}

// copyEvents inserts every event of src in id order, ids kept.
func copyEvents(ctx context.Context, q querier, src pgcopy.Source) (int64, error) {
	var n, last int64
	for {
		page, err := src.EventsAfter(ctx, last, eventPage)
		if err != nil || len(page) == 0 {
			return n, err
		}
		rows := make([][]any, 0, len(page))
		for _, e := range page {
			var data any
			if e.Data != nil {
				data = string(e.Data)
			}
			rows = append(rows, []any{e.ID, e.JobID, e.At, e.Type, string(e.Status), e.Attempt, data})
			last = e.ID
		}
		if err := insertRows(ctx, q, "job_events", []string{"id", "job_id", "at", "type", "status", "attempt", "data"}, rows); err != nil {
			return n, err
		}
		n += int64(len(page))
	}
}

// copySchedules inserts every schedule of src.
func copySchedules(ctx context.Context, q querier, src pgcopy.Source) (int64, error) {
	list, err := src.ListSchedules(ctx)
	if err != nil {
		return 0, err
	}
	rows := make([][]any, 0, len(list))
	for _, sc := range list {
		var deliver any
		if len(sc.Deliver) > 0 {
			deliver = string(sc.Deliver)
		}
		rows = append(rows, []any{sc.ID, sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron,
			sc.TimeZone, deliver, null(sc.Owner), sc.Paused, nullTime(sc.NextRunAt), nullTime(sc.LastFiredFor),
			sc.CreatedAt, sc.UpdatedAt})
	}
	return int64(len(rows)), insertRows(ctx, q, "schedules", []string{"id", "report", "params", "format", "bom", "cron",
		"timezone", "deliver", "owner", "paused", "next_run_at", "last_fired_for", "created_at", "updated_at"}, rows)
}

// copyAudit inserts the audit log of src, seqs kept, a page at a time (newest first).
func copyAudit(ctx context.Context, q querier, src pgcopy.Source) (int64, error) {
	var n int64
	f := store.AuditFilter{Limit: 1000}
	for {
		page, err := src.AuditLog(ctx, f)
		if err != nil || len(page) == 0 {
			return n, err
		}
		rows := make([][]any, 0, len(page))
		for _, e := range page {
			rows = append(rows, []any{e.Seq, e.At, e.Actor, e.Action, e.Job, e.Report, e.IP, e.Detail})
		}
		if err := insertRows(ctx, q, "audit_log", []string{"seq", "at", "actor", "action", "job", "report", "ip", "detail"}, rows); err != nil {
			return n, err
		}
		n += int64(len(page))
		f.Before = page[len(page)-1].Seq
	}
}

func null(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
