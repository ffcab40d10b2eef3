// Package pgcopy moves a single-node queue to several nodes (issue 17, "Moving up"): it
// copies every job, event, schedule and audit entry of a SQLite store into an empty
// PostgreSQL store, and the published files of the data directory into an
// S3-compatible bucket. `sheetq store copy` runs it while it holds the data directory's
// lock, so the SQLite store does not change underneath it.
package pgcopy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/internal/objstore"
	"sheetq/store"
	"sheetq/store/pg"
)

// ErrNotEmpty is returned when the target database already holds jobs or events: a copy
// into it would mix two queues' ids, sequence numbers and idempotency keys.
var ErrNotEmpty = errors.New("the target PostgreSQL store is not empty")

// Source is what Copy reads: the SQLite store (*store.Store) through its own reads, so
// that this package never opens the SQLite file itself.
type Source interface {
	// List pages through every job, newest first (ListOptions.Before is the cursor).
	List(ctx context.Context, o store.ListOptions) ([]store.Job, error)
	// EventsAfter pages through the event log in id order.
	EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.Event, error)
	// ListSchedules returns every schedule (issue 20).
	ListSchedules(ctx context.Context) ([]store.Schedule, error)
	// AuditLog pages through the audit log, newest first (AuditFilter.Before is the
	// cursor; issue 39).
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
}

// Options says where the published files go; the zero value copies the rows only.
type Options struct {
	// Bucket, when set, receives every SUCCEEDED job's published file before any row is
	// copied, and each copied job's recorded file name becomes its key there (a file
	// store records the key it publishes under: jobs.Files.Key).
	Bucket *objstore.Store
	// ExportsDir is the data directory's exports/ folder, where the files are read.
	ExportsDir string
	// Key names a job's object in the bucket: the key the S3 file store reads for the
	// attempt that published the file.
	Key func(id string, attempt int, fileName string) string
}

// Result counts what Copy did.
type Result struct {
	// Jobs, Events, Schedules and Audit (entries of the audit log) are the rows copied.
	Jobs, Events, Schedules, Audit int64
	// Files are the files uploaded; FilesPresent those already in the bucket with the
	// recorded size and sha256 (from an earlier run that stopped before the rows).
	Files, FilesPresent int
}

// pageSize is how many jobs one List reads: List's own maximum.
const pageSize = 1000

// eventPage is how many events one EventsAfter reads: its maximum.
const eventPage = 10_000

// Copy copies src into the PostgreSQL database dsn (migrated first, as a node does at
// start), which must hold no job and no event.
//
// The files go first, each under its own key and never overwriting (PutIfAbsent): a
// failure there leaves the database untouched, and a second run finds the uploaded
// objects and checks them instead of sending them again. Then every job (with the
// bucket's keys as its file names when there is a bucket) and every event is
// written in one transaction, with COPY, keeping the jobs' insertion order (seq) and
// the events' ids; the identity sequences are moved past the copied values in the same
// transaction (ALTER TABLE ... RESTART is transactional, setval is not), so that a
// failure anywhere leaves the target exactly as it was.
//
// Jobs are copied as they are, PROCESSING ones too: they are the running attempts of a
// server that has stopped, and a node's stale sweep recovers them by their old heartbeat,
// as the SQLite server's start-up would have (rule 4).
func Copy(ctx context.Context, src Source, dsn string, opts Options) (Result, error) {
	var res Result
	// pg.Open applies the migrations under their advisory lock.
	st, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		return res, err
	}
	st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return res, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A cheap look first, so that a non-empty target is refused before any upload; the
	// transaction below looks again under its lock.
	if err := checkEmpty(ctx, conn); err != nil {
		return res, err
	}
	if opts.Bucket != nil {
		if err := CopyFiles(ctx, src, opts, &res); err != nil {
			return res, err
		}
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Nodes already pointed at the database wait until the copy commits, and a
		// second copy finds the first one's rows. ACCESS EXCLUSIVE at once, since the
		// RESTARTs below need it anyway: taking a weaker lock first could deadlock.
		if _, err := tx.Exec(ctx, `LOCK TABLE jobs, job_events, schedules, audit_log IN ACCESS EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock the target tables: %w", err)
		}
		if err := checkEmpty(ctx, tx); err != nil {
			return err
		}
		var maxSeq, maxEvent, maxAudit int64
		if res.Jobs, maxSeq, err = copyJobs(ctx, tx, src, opts); err != nil {
			return fmt.Errorf("copy jobs: %w", err)
		}
		if res.Events, maxEvent, err = copyEvents(ctx, tx, src); err != nil {
			return fmt.Errorf("copy events: %w", err)
		}
		if res.Schedules, err = copySchedules(ctx, tx, src); err != nil {
			return fmt.Errorf("copy schedules: %w", err)
		}
		if res.Audit, maxAudit, err = copyAudit(ctx, tx, src); err != nil {
			return fmt.Errorf("copy the audit log: %w", err)
		}
		// The next job and event continue after the copied ones. Identity values are
		// integers that this code formats; DDL takes no parameters.
		for _, r := range []struct {
			table, column string
			max           int64
		}{{"jobs", "seq", maxSeq}, {"job_events", "id", maxEvent}, {"audit_log", "seq", maxAudit}} {
			if r.max == 0 {
				continue
			}
			if _, err := tx.Exec(ctx, `ALTER TABLE `+r.table+` ALTER COLUMN `+r.column+` RESTART WITH `+strconv.FormatInt(r.max+1, 10)); err != nil {
				return fmt.Errorf("move the %s.%s sequence: %w", r.table, r.column, err)
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// checkEmpty refuses a database that holds any job, event, schedule or audit entry.
func checkEmpty(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	var jobs, events, schedules, audit bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs), EXISTS (SELECT 1 FROM job_events), EXISTS (SELECT 1 FROM schedules),
		EXISTS (SELECT 1 FROM audit_log)`).Scan(&jobs, &events, &schedules, &audit)
	switch {
	case err != nil:
		return fmt.Errorf("look at the target: %w", err)
	case jobs || events || schedules || audit:
		return ErrNotEmpty
	}
	return nil
}

// eachJob calls fn with every job of src, newest first, one page in memory at a time.
func eachJob(ctx context.Context, src Source, fn func(store.Job) error) error {
	var before int64
	for {
		page, err := src.List(ctx, store.ListOptions{Limit: pageSize, Before: before})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, j := range page {
			if err := fn(j); err != nil {
				return err
			}
		}
		before = page[len(page)-1].Seq
	}
}

// jobCopyColumns are the columns copyJobs writes, in jobRow's order: every column of
// the schema but the events' commit cursor, which the database fills.
var jobCopyColumns = []string{"id", "seq", "kind", "args", "status", "queue", "priority", "run_at", "attempt",
	"max_attempts", "worker", "created_at", "started_at", "heartbeat_at", "finished_at", "progress_rows",
	"progress_total", "cancel_requested", "error_code", "error_message", "file_name", "file_size",
	"file_sha256", "idempotency_key", "request_hash", "warnings", "created_by", "notify_url", "parent_id", "attempt_base"}

// copyJobs streams every job into the jobs table with one COPY, which writes the given
// seq into the identity column as INSERT ... OVERRIDING SYSTEM VALUE would; one page of
// jobs is in memory at a time. It returns the count and the highest seq.
func copyJobs(ctx context.Context, tx pgx.Tx, src Source, opts Options) (n, maxSeq int64, err error) {
	var page []store.Job
	var next int
	var before int64 // List's cursor; 0 starts at the newest job
	n, err = tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, jobCopyColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if next == len(page) {
			var err error
			if page, err = src.List(ctx, store.ListOptions{Limit: pageSize, Before: before}); err != nil || len(page) == 0 {
				return nil, err
			}
			next, before = 0, page[len(page)-1].Seq
		}
		j := page[next]
		next++
		maxSeq = max(maxSeq, j.Seq)
		if opts.Bucket != nil && j.FileName != "" {
			j.FileName = opts.Key(j.ID, j.Attempt, j.FileName)
		}
		return jobRow(j)
	}))
	return n, maxSeq, err
}

// jobRow is one job in jobCopyColumns' order; empty strings and zero times are NULL,
// as the SQLite store wrote them.
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

// copyEvents streams the event log into job_events with one COPY, keeping each event's
// id (and so their order), and returns the count and the highest id.
func copyEvents(ctx context.Context, tx pgx.Tx, src Source) (n, maxID int64, err error) {
	var page []store.Event
	var next int
	n, err = tx.CopyFrom(ctx, pgx.Identifier{"job_events"}, []string{"id", "job_id", "at", "type", "status", "attempt", "data"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if next == len(page) {
				var err error
				if page, err = src.EventsAfter(ctx, maxID, eventPage); err != nil || len(page) == 0 {
					return nil, err
				}
				next = 0
			}
			e := page[next]
			next++
			maxID = e.ID
			var data any
			if e.Data != nil {
				data = string(e.Data)
			}
			return []any{e.ID, e.JobID, e.At, e.Type, string(e.Status), e.Attempt, data}, nil
		}))
	return n, maxID, err
}

// CopyFiles uploads every SUCCEEDED job's published file, counting them in res (the
// MySQL copy, store/mysqlcopy, does it the same way).
func CopyFiles(ctx context.Context, src Source, opts Options, res *Result) error {
	return eachJob(ctx, src, func(j store.Job) error {
		if j.Status != store.StatusSucceeded || j.FileName == "" {
			return nil
		}
		present, err := copyFile(ctx, j, opts)
		if err != nil {
			return fmt.Errorf("copy the file of job %s: %w", j.ID, err)
		}
		if present {
			res.FilesPresent++
		} else {
			res.Files++
		}
		return nil
	})
}

// copyFile uploads one job's file under its key and checks the object's size and
// sha256 against the job's record. present is true when an earlier run had put it there.
func copyFile(ctx context.Context, j store.Job, opts Options) (present bool, err error) {
	if filepath.Base(j.FileName) != j.FileName || strings.ContainsAny(j.FileName, `/\`) {
		return false, fmt.Errorf("recorded file name %q is not a plain name", j.FileName)
	}
	path := filepath.Join(opts.ExportsDir, j.FileName)
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("%w (sheetq doctor lists every missing file)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != j.FileSize {
		return false, fmt.Errorf("%s: %d bytes (%s), but the job recorded %d (sheetq doctor --deep checks every file)", path, fi.Size(), fi.Mode().Type(), j.FileSize)
	}
	key := opts.Key(j.ID, j.Attempt, j.FileName)
	// PutIfAbsent hashes what it sends and removes the object when that differs from the
	// recorded sha256, so a file changed on disk is refused, not published.
	err = opts.Bucket.PutIfAbsent(ctx, key, f, fi.Size(), j.FileSHA256)
	present = errors.Is(err, objstore.ErrExists)
	if err != nil && !present {
		return false, err
	}
	info, err := opts.Bucket.Stat(ctx, key)
	if err != nil {
		return present, err
	}
	if info.Size != j.FileSize || !strings.EqualFold(info.SHA256, j.FileSHA256) {
		return present, fmt.Errorf("object %s holds %d bytes with sha256 %q, but the job recorded %d bytes with sha256 %s; remove the object or check the bucket",
			key, info.Size, info.SHA256, j.FileSize, j.FileSHA256)
	}
	return present, nil
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

// copySchedules writes every schedule of src as it is, its times and its next firing
// included: a firing the old server had not made yet is made by the nodes, once.
func copySchedules(ctx context.Context, tx pgx.Tx, src Source) (int64, error) {
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
	return tx.CopyFrom(ctx, pgx.Identifier{"schedules"}, []string{"id", "report", "params", "format", "bom", "cron",
		"timezone", "deliver", "owner", "paused", "next_run_at", "last_fired_for", "created_at", "updated_at"},
		pgx.CopyFromRows(rows))
}

// auditPage is how many audit entries one AuditLog reads: its maximum.
const auditPage = 1000

// copyAudit writes every entry of src's audit log as it is, its seq kept (COPY writes an
// identity column's given values), a page at a time, and returns how many and the
// greatest seq. The people seen are not copied: each is saved again at their next
// sign-in.
func copyAudit(ctx context.Context, tx pgx.Tx, src Source) (n, maxSeq int64, err error) {
	f := store.AuditFilter{Limit: auditPage}
	for {
		page, err := src.AuditLog(ctx, f)
		if err != nil {
			return n, maxSeq, err
		}
		if len(page) == 0 {
			return n, maxSeq, nil
		}
		rows := make([][]any, 0, len(page))
		for _, e := range page {
			rows = append(rows, []any{e.Seq, e.At, e.Actor, e.Action, e.Job, e.Report, e.IP, e.Detail})
			maxSeq = max(maxSeq, e.Seq)
		}
		c, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_log"}, []string{"seq", "at", "actor", "action", "job", "report", "ip", "detail"},
			pgx.CopyFromRows(rows))
		n += c
		if err != nil {
			return n, maxSeq, err
		}
		f.Before = page[len(page)-1].Seq
	}
}
