package mysqlcopy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/mysqlcopy"
	"sheetq/store/pgcopy"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
	"sheetq/store/storetest/mysqltest"
)

// TestCopyKeepsEveryJobAndEvent copies a SQLite queue with jobs in several states, a
// follow-up, a schedule and an audit log into a fresh MariaDB database and reads it back
// through the MySQL store as it was, then uses it as a node would: the copied
// idempotency key answers with its job, new jobs, events and entries are numbered after
// the copied ones, and the SQLite event cursor still resumes. A second copy is refused.
func TestCopyKeepsEveryJobAndEvent(t *testing.T) {
	dsn := mysqltest.FreshDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clock := storetest.ClockAt(time.Now().Add(-time.Hour).Truncate(time.Millisecond).UTC())
	hook := func(j store.Job) ([]store.FollowUp, error) {
		if j.NotifyURL == "" {
			return nil, nil
		}
		return []store.FollowUp{{ID: store.NewID(), Kind: "webhook", Queue: "webhooks", Args: json.RawMessage(`{"export_id":"` + j.ID + `"}`),
			ParentEvent: "webhook_queued"}}, nil
	}
	src := storetest.Open(t, filepath.Join(t.TempDir(), "sheetq.db"), sqlite.Options{Now: clock.Now, FollowUps: hook})
	enq := func(nj store.NewJob) string {
		clock.Advance(time.Second)
		if nj.Args == nil {
			nj.Args = json.RawMessage(`{"report":"sales"}`)
		}
		return storetest.Enqueue(t, src, nj).ID
	}
	enq(store.NewJob{CreatedBy: "ci"})
	j := storetest.Claim(t, src, "node-a:1", store.DefaultQueue)
	if _, err := src.Heartbeat(ctx, j.ID, j.Attempt, 40, 100); err != nil {
		t.Fatal(err)
	}
	done := enq(store.NewJob{NotifyURL: "https://example.com/hook", Priority: -1})
	j = storetest.Claim(t, src, "node-a:1", store.DefaultQueue)
	if j.ID != done {
		t.Fatalf("claimed %s, want %s", j.ID, done)
	}
	if _, err := src.Succeed(ctx, j.ID, j.Attempt, store.FileResult{Name: j.ID + ".xlsx", Size: 7, SHA256: "ab", Rows: 3, Warnings: []string{"w"}}, nil); err != nil {
		t.Fatal(err)
	}
	enq(store.NewJob{MaxAttempts: 1})
	j = storetest.Claim(t, src, "node-a:1", store.DefaultQueue)
	if _, err := src.Fail(ctx, j.ID, j.Attempt, store.AttemptError{Code: "query_failed", Message: "ü", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}
	keyed := enq(store.NewJob{IdempotencyKey: "client:k1", RequestHash: "h1", Queue: "heavy"})
	if _, err := src.CreateSchedule(ctx, store.Schedule{ID: "s1", Report: "orders", Params: json.RawMessage(`{"a":1}`), Cron: "0 6 * * *",
		TimeZone: "Europe/Berlin", NextRunAt: clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range 1200 {
		if _, err := src.Audit(ctx, store.AuditEntry{Actor: fmt.Sprint("p", i%3), Action: "export_requested", Job: "j", At: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	wantJobs, err := src.List(ctx, store.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents, err := src.EventsAfter(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	wantSched, _ := src.ListSchedules(ctx)
	head, err := src.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	res, err := mysqlcopy.Copy(ctx, src, dsn, pgcopy.Options{})
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if res.Jobs != int64(len(wantJobs)) || res.Events != int64(len(wantEvents)) || res.Schedules != 1 || res.Audit != 1200 {
		t.Fatalf("copy = %+v, want %d jobs, %d events, 1 schedule, 1200 entries", res, len(wantJobs), len(wantEvents))
	}
	if _, err := mysqlcopy.Copy(ctx, src, dsn, pgcopy.Options{}); !errors.Is(err, mysqlcopy.ErrNotEmpty) {
		t.Fatalf("second copy: %v, want ErrNotEmpty", err)
	}

	dst, err := mysql.Open(ctx, dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	gotJobs, err := dst.List(ctx, store.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotJobs, wantJobs) {
		t.Errorf("jobs differ:\n got %+v\nwant %+v", gotJobs, wantJobs)
	}
	gotEvents, err := dst.EventsAfter(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotEvents, wantEvents) {
		t.Errorf("events differ:\n got %+v\nwant %+v", gotEvents, wantEvents)
	}
	if got, _ := dst.ListSchedules(ctx); !reflect.DeepEqual(got, wantSched) {
		t.Errorf("schedules differ:\n got %+v\nwant %+v", got, wantSched)
	}
	// The SQLite node's head resumes here: nothing after it yet, and kept.
	if evs, _, err := dst.EventsSince(ctx, head, 10); err != nil || len(evs) != 0 {
		t.Errorf("events since the SQLite head: %v, %v; want none", evs, err)
	}
	if kept, err := dst.EventsKept(ctx, head); err != nil || !kept {
		t.Errorf("SQLite head kept: %v, %v", kept, err)
	}
	// The key answers with its job; a new job and its event come after the copied ones.
	j2, existed, err := dst.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "client:k1", RequestHash: "h1"})
	if err != nil || !existed || j2.ID != keyed {
		t.Fatalf("the copied key: %s existed=%v %v, want %s", j2.ID, existed, err, keyed)
	}
	fresh := storetest.Enqueue(t, dst, store.NewJob{Args: json.RawMessage(`{}`)})
	if fresh.Seq <= wantJobs[0].Seq {
		t.Errorf("new job's seq %d, want after the copied %d", fresh.Seq, wantJobs[0].Seq)
	}
	evs, _, err := dst.EventsSince(ctx, head, 10)
	if err != nil || len(evs) != 1 || evs[0].JobID != fresh.ID || evs[0].ID <= wantEvents[len(wantEvents)-1].ID {
		t.Errorf("events after the copy: %v, %v; want the new job's accepted event after the copied ones", evs, err)
	}
	if e, err := dst.Audit(ctx, store.AuditEntry{Actor: "ann", Action: "signin"}); err != nil || e.Seq <= 1200 {
		t.Errorf("a new audit entry: seq %d, %v; want one after the copied", e.Seq, err)
	}
}
