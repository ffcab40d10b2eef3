package pgcopy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/internal/objstore"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/pgcopy"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
	"sheetq/store/storetest/pgtest"
)

var ctx = context.Background()

// exec runs one statement on a connection of its own.
func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// count reads one number from the target.
func count(t *testing.T, dsn, sql string) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// source is a SQLite store in a data directory of its own, holding a job in every state.
type source struct {
	st      *store.Store
	exports string
	// ids by what the test does with them.
	pending, keyed, processing, succeeded, followUp, failed, canceled, expired, retried string
}

// newSource builds the SQLite queue to copy through the store's own operations. Its
// clock is an hour behind, so that the copied PENDING jobs are due on PostgreSQL (whose
// clock is the database's) and the copied PROCESSING job's heartbeat is stale there.
func newSource(t *testing.T) *source {
	t.Helper()
	dir := t.TempDir()
	clock := storetest.ClockAt(time.Now().Add(-time.Hour).Truncate(time.Millisecond).UTC())
	// A webhook-like follow-up: a job with a notify URL gets a delivery when it ends.
	hook := func(j store.Job) ([]store.FollowUp, error) {
		if j.NotifyURL == "" {
			return nil, nil
		}
		return []store.FollowUp{{ID: store.NewID(), Kind: "webhook", Queue: "webhooks", Args: json.RawMessage(`{"export_id":"` + j.ID + `"}`),
			AcceptedData: json.RawMessage(`{"for":"` + j.ID + `"}`), ParentEvent: "webhook_queued", ParentData: json.RawMessage(`{"n":1}`)}}, nil
	}
	st := storetest.Open(t, filepath.Join(dir, "sheetq.db"), sqlite.Options{Now: clock.Now, FollowUps: hook})
	s := &source{st: st, exports: filepath.Join(dir, "exports")}
	if err := os.MkdirAll(s.exports, 0o755); err != nil {
		t.Fatal(err)
	}
	enq := func(nj store.NewJob) string { clock.Advance(time.Second); return storetest.Enqueue(t, st, nj).ID }
	claim := func(id string) store.Job {
		t.Helper()
		j := storetest.Claim(t, st, "node-a:1", storetest.Get(t, st, id).Queue)
		if j.ID != id {
			t.Fatalf("claimed %s, want %s", j.ID, id)
		}
		return j
	}

	// Claimed first, so that the claims below take the job each one means.
	s.processing = enq(store.NewJob{Args: json.RawMessage(`{"report":"running"}`), CreatedBy: "ci"})
	j := claim(s.processing)
	if _, err := st.Heartbeat(ctx, j.ID, j.Attempt, 40, 100); err != nil {
		t.Fatal(err)
	}

	s.succeeded = enq(store.NewJob{Args: json.RawMessage(`{"report":"sales", "params": {"year": 2030}}`), NotifyURL: "https://example.com/hook", Priority: -1})
	j = claim(s.succeeded)
	body := []byte("a published spreadsheet\n")
	sum := sha256.Sum256(body)
	name := j.ID + ".xlsx"
	if err := os.WriteFile(filepath.Join(s.exports, name), body, 0o644); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := st.Succeed(ctx, j.ID, j.Attempt, store.FileResult{Name: name, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:]),
		Rows: 3, Warnings: []string{"cut at 32767 characters"}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range storetest.Events(t, st, s.succeeded) {
		if e.Type == "webhook_queued" {
			s.followUp = followUpOf(t, st, s.succeeded)
		}
	}
	if s.followUp == "" {
		t.Fatal("the succeeded job has no follow-up")
	}

	s.failed = enq(store.NewJob{Args: json.RawMessage(`{}`), MaxAttempts: 1})
	j = claim(s.failed)
	if _, err := st.Fail(ctx, j.ID, j.Attempt, store.AttemptError{Code: "query_failed", Message: "no such table", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}

	s.expired = enq(store.NewJob{Args: json.RawMessage(`{}`)})
	j = claim(s.expired)
	if _, err := st.Succeed(ctx, j.ID, j.Attempt, store.FileResult{Name: j.ID + ".xlsx", Size: 1, SHA256: strings.Repeat("0", 64)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Expire(ctx, j.ID); err != nil {
		t.Fatal(err)
	}

	// Retried last: back to PENDING at once, it would be the next claim.
	s.retried = enq(store.NewJob{Args: json.RawMessage(`{}`)})
	j = claim(s.retried)
	if _, err := st.Fail(ctx, j.ID, j.Attempt, store.AttemptError{Code: "timeout", Message: "slow"}, 0); err != nil {
		t.Fatal(err)
	}

	s.canceled = enq(store.NewJob{Args: json.RawMessage(`{}`)})
	if _, err := st.Cancel(ctx, s.canceled); err != nil {
		t.Fatal(err)
	}
	// Run again by hand after it failed: its attempt base (1) is copied with it.
	// A queue of its own, so that its claim does not take the retried job above.
	again := enq(store.NewJob{Args: json.RawMessage(`{}`), MaxAttempts: 1, Queue: "manual"})
	j = claim(again)
	if _, err := st.Fail(ctx, j.ID, j.Attempt, store.AttemptError{Code: "timeout", Message: "slow"}, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Retry(ctx, again, 2); err != nil || r.AttemptBase != 1 {
		t.Fatalf("retry by hand: %+v, %v", r, err)
	}

	// Two schedules: one that fired and waits for its next time, one paused.
	for _, sc := range []store.Schedule{
		{ID: "sched-monthly", Report: "orders", Params: json.RawMessage(`{"from":"month_start(-1)","to":"month_start(0)"}`),
			Format: "csv", BOM: true, Cron: "0 6 1 * *", TimeZone: "Europe/Berlin", Owner: "ci",
			Deliver: json.RawMessage(`[{"folder":"/srv/out"}]`), NextRunAt: clock.Now()},
		{ID: "sched-paused", Report: "orders", Params: json.RawMessage(`{}`), Cron: "@daily", TimeZone: "UTC", Paused: true},
	} {
		if _, err := st.CreateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	monthly, err := st.GetSchedule(ctx, "sched-monthly")
	if err != nil {
		t.Fatal(err)
	}
	if _, fired, err := st.FireSchedule(ctx, store.Firing{ScheduleID: monthly.ID, Due: monthly.NextRunAt,
		ScheduledFor: monthly.NextRunAt, Next: monthly.NextRunAt.AddDate(0, 1, 0),
		Job: store.NewJob{ID: store.NewID(), Kind: "export", Args: json.RawMessage(`{"report":"orders"}`),
			IdempotencyKey: "schedule:sched-monthly:1", RequestHash: "h"}}); err != nil || !fired {
		t.Fatalf("fire: %v %v", fired, err)
	}

	s.pending = enq(store.NewJob{Args: json.RawMessage(`{"report":"later"}`), Queue: "heavy", Priority: 5})
	s.keyed = enq(store.NewJob{Args: json.RawMessage(`{"report":"keyed"}`), IdempotencyKey: "key-1", RequestHash: "hash-1", CreatedBy: "ci"})
	return s
}

// followUpOf finds the job whose parent is id.
func followUpOf(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	jobs, err := st.List(ctx, store.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ParentID == id {
			return j.ID
		}
	}
	return ""
}

// allJobs lists every job of the SQLite store.
func allJobs(t *testing.T, st *store.Store) []store.Job {
	t.Helper()
	jobs, err := st.List(ctx, store.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestCopyKeepsEveryJobAndEvent copies a queue with a job in every state into a fresh
// schema and reads each back through the PostgreSQL store, field by field, then uses
// the copy as a node would: the copied idempotency key answers with its job, a copied
// PENDING job is claimed and run, the stale sweep finds the copied PROCESSING job, and
// new jobs and events are numbered after the copied ones.
func TestCopyKeepsEveryJobAndEvent(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	src := newSource(t)
	jobs := allJobs(t, src.st)
	var events int64
	for _, j := range jobs {
		events += int64(len(storetest.Events(t, src.st, j.ID)))
	}

	// The audit log too, more than a page of it (issue 39).
	for i := range 1500 {
		if _, err := src.st.Audit(ctx, store.AuditEntry{Actor: fmt.Sprint("p", i%7), Action: "export_requested",
			Job: fmt.Sprint("job", i), Report: "sales", IP: "192.0.2.1", Detail: "ü", At: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	wantAudit := allAudit(t, src.st)

	res, err := pgcopy.Copy(ctx, src.st, dsn, pgcopy.Options{})
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if res.Jobs != int64(len(jobs)) || res.Events != events || res.Schedules != 2 || res.Audit != 1500 || res.Files != 0 {
		t.Fatalf("copy = %+v, want %d jobs, %d events, 2 schedules and 1500 audit entries", res, len(jobs), events)
	}

	dst, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got := allAudit(t, dst); !reflect.DeepEqual(got, wantAudit) {
		t.Errorf("audit log: %d entries, want %d as they were", len(got), len(wantAudit))
	}
	if e, err := dst.Audit(ctx, store.AuditEntry{Actor: "ann", Action: "signin"}); err != nil || e.Seq <= wantAudit[0].Seq {
		t.Errorf("a new audit entry: seq %d, %v; want one after the copied %d", e.Seq, err, wantAudit[0].Seq)
	}
	wantSc, err := src.st.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gotSc, err := dst.ListSchedules(ctx); err != nil || !reflect.DeepEqual(gotSc, wantSc) {
		t.Errorf("schedules (%v):\n got %+v\nwant %+v", err, gotSc, wantSc)
	}
	statuses := map[store.Status]int{}
	var maxSeq, maxEvent int64
	for _, want := range jobs {
		got, err := dst.Get(ctx, want.ID)
		if err != nil {
			t.Fatalf("get %s: %v", want.ID, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("job %s:\n got %+v\nwant %+v", want.ID, got, want)
		}
		statuses[want.Status]++
		maxSeq = max(maxSeq, want.Seq)
		wantEv := storetest.Events(t, src.st, want.ID)
		gotEv, err := dst.Events(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotEv, wantEv) {
			t.Errorf("events of %s:\n got %+v\nwant %+v", want.ID, gotEv, wantEv)
		}
		for _, e := range wantEv {
			maxEvent = max(maxEvent, e.ID)
		}
	}
	for _, s := range []store.Status{store.StatusPending, store.StatusProcessing, store.StatusSucceeded,
		store.StatusFailed, store.StatusCanceled, store.StatusExpired} {
		if statuses[s] == 0 {
			t.Errorf("the source holds no %s job, so the copy of one is not checked", s)
		}
	}
	if got := storetest.Get(t, src.st, src.followUp).ParentID; got != src.succeeded {
		t.Fatalf("follow-up's parent = %q", got)
	}

	// The copied key answers with its job, on PostgreSQL as it did on SQLite.
	j, existed, err := dst.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "key-1", RequestHash: "hash-1"})
	if err != nil || !existed || j.ID != src.keyed {
		t.Fatalf("enqueue with the copied key = %s, existed %v, %v; want %s", j.ID, existed, err, src.keyed)
	}
	if _, _, err := dst.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "key-1", RequestHash: "other"}); !errors.Is(err, store.ErrIdempotencyMismatch) {
		t.Fatalf("copied key with another body: %v, want ErrIdempotencyMismatch", err)
	}

	// New rows are numbered after the copied ones.
	fresh, _, err := dst.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// (The enqueues that met the key above took identity values too: gaps are fine.)
	if fresh.Seq <= maxSeq {
		t.Fatalf("a new job's seq = %d, want one after the copied jobs' %d", fresh.Seq, maxSeq)
	}
	ev, err := dst.Events(ctx, fresh.ID)
	if err != nil || len(ev) != 1 || ev[0].ID <= maxEvent {
		t.Fatalf("a new job's events = %+v, %v; want one with an id after the copied %d", ev, err, maxEvent)
	}

	// The copied PENDING job of the heavy lane is claimed and run.
	claimed, err := dst.ClaimBatch(ctx, "node-b:1", "heavy", 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != src.pending {
		t.Fatalf("claim from heavy = %+v, %v; want the copied %s", claimed, err, src.pending)
	}
	done := dst.FinishBatch(ctx, []store.Finish{{ID: claimed[0].ID, Attempt: claimed[0].Attempt, Outcome: store.Succeeded,
		Result: store.FileResult{Name: claimed[0].ID + ".xlsx", Size: 1, SHA256: strings.Repeat("a", 64)}}})
	if done[0].Err != nil || done[0].Job.Status != store.StatusSucceeded {
		t.Fatalf("finish the copied job: %+v", done[0])
	}

	// The copied PROCESSING job's heartbeat is an hour old: a node's sweep finds it.
	stale, err := dst.Stale(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].ID != src.processing {
		t.Fatalf("stale = %+v, want the copied PROCESSING job %s", stale, src.processing)
	}
}

// TestCopyRefusesANonEmptyTarget: a second copy into the same database is refused
// before it writes anything.
func TestCopyRefusesANonEmptyTarget(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	src := newSource(t)
	first, err := pgcopy.Copy(ctx, src.st, dsn, pgcopy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgcopy.Copy(ctx, src.st, dsn, pgcopy.Options{}); !errors.Is(err, pgcopy.ErrNotEmpty) {
		t.Fatalf("second copy: %v, want ErrNotEmpty", err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM jobs`); n != first.Jobs {
		t.Fatalf("target holds %d jobs after the refused copy, want %d", n, first.Jobs)
	}
	// Events alone make a target non-empty too.
	dsn2 := pgtest.FreshSchema(t)
	if _, err := pg.Open(ctx, dsn2, pg.Options{}); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn2, `ALTER TABLE job_events DROP CONSTRAINT job_events_job_id_fkey`)
	exec(t, dsn2, `INSERT INTO job_events (job_id, at, type, status, attempt) VALUES ('gone', now(), 'accepted', 'PENDING', 0)`)
	if _, err := pgcopy.Copy(ctx, src.st, dsn2, pgcopy.Options{}); !errors.Is(err, pgcopy.ErrNotEmpty) {
		t.Fatalf("copy into a target with events: %v, want ErrNotEmpty", err)
	}
}

// failingEvents is the source store whose event reads fail after the first page: a copy
// that breaks after the jobs went in.
type failingEvents struct {
	*store.Store
}

func (f failingEvents) EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.Event, error) {
	if afterID > 0 {
		return nil, errors.New("disk went away")
	}
	return f.Store.EventsAfter(ctx, afterID, 3)
}

// TestCopyFailureLeavesTargetUnchanged: a copy that fails halfway commits nothing, and
// does not move the sequences either, so the target is as it was.
func TestCopyFailureLeavesTargetUnchanged(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	src := newSource(t)
	if _, err := pgcopy.Copy(ctx, failingEvents{src.st}, dsn, pgcopy.Options{}); err == nil || !strings.Contains(err.Error(), "disk went away") {
		t.Fatalf("copy: %v, want the source's error", err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM jobs`) + count(t, dsn, `SELECT count(*) FROM job_events`); n != 0 {
		t.Fatalf("target holds %d rows after a failed copy", n)
	}
	dst, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	j, _, err := dst.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`)})
	if err != nil || j.Seq != 1 {
		t.Fatalf("first job after a failed copy: seq %d, %v; want 1", j.Seq, err)
	}
	// And a copy after the failure works, once the target is empty again.
	exec(t, dsn, `TRUNCATE jobs CASCADE`)
	if _, err := pgcopy.Copy(ctx, src.st, dsn, pgcopy.Options{}); err != nil {
		t.Fatalf("copy after a failed one: %v", err)
	}
}

// newBucket returns a store on a bucket of the test's own, under the prefix "p/".
func newBucket(t *testing.T) *objstore.Store {
	t.Helper()
	e := objstoretest.Bucket(t)
	cfg, err := objstore.ParseURL(e.URL("p"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AccessKey, cfg.SecretKey = e.AccessKey, e.SecretKey
	b, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testKey is the bucket key of a job's file; sheetq store copy passes jobs.ObjectKey.
func testKey(id string, attempt int, fileName string) string {
	return "exports/" + id + "/" + strconv.Itoa(attempt) + filepath.Ext(fileName)
}

// TestCopyFiles: each SUCCEEDED job's file goes to the bucket under its key with the
// recorded size and sha256; a second run finds it there and checks it; a file changed
// on disk is refused before any row is copied.
func TestCopyFiles(t *testing.T) {
	bucket := newBucket(t)
	src := newSource(t)
	opts := pgcopy.Options{Bucket: bucket, ExportsDir: src.exports, Key: testKey}
	first := pgtest.FreshSchema(t)
	res, err := pgcopy.Copy(ctx, src.st, first, opts)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if res.Files != 1 || res.FilesPresent != 0 {
		t.Fatalf("copy = %+v, want 1 file uploaded", res)
	}
	j := storetest.Get(t, src.st, src.succeeded)
	key := testKey(j.ID, j.Attempt, j.FileName)
	info, err := bucket.Stat(ctx, key)
	if err != nil || info.Size != j.FileSize || info.SHA256 != j.FileSHA256 {
		t.Fatalf("object %s = %+v, %v; want %d bytes, sha256 %s", key, info, err, j.FileSize, j.FileSHA256)
	}
	// The copied job records the key, as a node publishing to the bucket would.
	dst, err := pg.Open(ctx, first, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got, err := dst.Get(ctx, j.ID); err != nil || got.FileName != key || got.FileSize != j.FileSize || got.FileSHA256 != j.FileSHA256 {
		t.Fatalf("copied job's file = %q %d %s, %v; want %q", got.FileName, got.FileSize, got.FileSHA256, err, key)
	}
	objs, err := bucket.List(ctx, "")
	if err != nil || len(objs) != 1 {
		t.Fatalf("bucket holds %+v, %v; want the one file (not the EXPIRED job's)", objs, err)
	}

	// A second run (into another database) finds the object and checks it.
	res, err = pgcopy.Copy(ctx, src.st, pgtest.FreshSchema(t), opts)
	if err != nil || res.Files != 0 || res.FilesPresent != 1 {
		t.Fatalf("second copy = %+v, %v; want the file found present", res, err)
	}

	// A file changed on disk (same size) is refused, and no row is copied.
	if err := os.WriteFile(filepath.Join(src.exports, j.FileName), []byte(strings.Repeat("x", int(j.FileSize))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bucket.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.FreshSchema(t)
	if _, err := pgcopy.Copy(ctx, src.st, dsn, opts); err == nil || !strings.Contains(err.Error(), j.ID) {
		t.Fatalf("copy of a changed file: %v, want an error naming job %s", err, j.ID)
	}
	if n := count(t, dsn, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("target holds %d jobs after a refused file", n)
	}
	if _, err := bucket.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the changed file's object: %v, want none left", err)
	}

	// A missing file is refused too.
	if err := os.Remove(filepath.Join(src.exports, j.FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcopy.Copy(ctx, src.st, pgtest.FreshSchema(t), opts); err == nil || !strings.Contains(err.Error(), "doctor") {
		t.Fatalf("copy with a missing file: %v, want an error pointing at doctor", err)
	}
}

// BenchmarkCopy copies a queue of 20,000 PENDING jobs (args of about 300 bytes) and
// their events into a fresh schema per iteration; jobs/s is the figure to read.
func BenchmarkCopy(b *testing.B) {
	const n = 20_000
	st := storetest.Open(b, filepath.Join(b.TempDir(), "sheetq.db"), sqlite.Options{})
	storetest.FillJobs(b, st, n)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		dsn := pgtest.FreshSchema(b)
		b.StartTimer()
		res, err := pgcopy.Copy(ctx, st, dsn, pgcopy.Options{})
		if err != nil || res.Jobs != n {
			b.Fatalf("copy = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// allAudit is every entry of st's audit log, newest first.
func allAudit(t *testing.T, st *store.Store) []store.AuditEntry {
	t.Helper()
	var all []store.AuditEntry
	f := store.AuditFilter{Limit: 1000}
	for {
		page, err := st.AuditLog(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		f.Before = page[len(page)-1].Seq
	}
}
