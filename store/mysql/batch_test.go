package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest/mysqltest"
)

// enqueueGroup opens the driver on a fresh database and sends njs as one group (what
// the core's group commit hands it), returning the answers and a connection of the
// test's own.
func enqueueGroup(t *testing.T, before []store.NewJob, njs ...store.NewJob) ([]store.Enqueued, *sql.DB, int64) {
	t.Helper()
	ctx := context.Background()
	dsn := mysqltest.FreshDatabase(t)
	d, err := mysql.OpenDriver(ctx, dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for i := range njs {
		if njs[i].Kind == "" {
			njs[i].Kind, njs[i].Args, njs[i].MaxAttempts = "test", json.RawMessage(`{}`), 3
		}
	}
	if len(before) > 0 {
		if _, err := d.EnqueueBatch(ctx, before); err != nil {
			t.Fatal(err)
		}
	}
	base := mysql.GroupInserts(d)
	rs, err := d.EnqueueBatch(ctx, njs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(njs) {
		t.Fatalf("%d answers for %d jobs", len(rs), len(njs))
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return rs, db, mysql.GroupInserts(d) - base
}

// acceptedEvents counts each job's "accepted" events, and returns the jobs in the order
// of their events' ids.
func acceptedEvents(t *testing.T, db *sql.DB) (map[string]int, []string) {
	t.Helper()
	rows, err := db.Query(`SELECT job_id FROM job_events WHERE type = 'accepted' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	var order []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		n[id]++
		order = append(order, id)
	}
	return n, order
}

// TestEnqueueBatchOneStatement: a group the server takes whole goes in with one INSERT
// (insertAll): every job PENDING, stamped, read back, with one "accepted" event each, in
// the group's order.
func TestEnqueueBatchOneStatement(t *testing.T) {
	rs, db, whole := enqueueGroup(t, nil,
		store.NewJob{ID: "a"}, store.NewJob{ID: "b", IdempotencyKey: "k", RequestHash: "h"}, store.NewJob{ID: "c", Priority: 5})
	if whole != 1 {
		t.Errorf("%d groups went in with one INSERT, want 1", whole)
	}
	for i, r := range rs {
		if r.Err != nil || r.Existed || r.Job.Status != store.StatusPending || r.Job.CreatedAt.IsZero() || r.Job.Seq == 0 {
			t.Errorf("call %d: %+v", i, r)
		}
	}
	if rs[1].Job.IdempotencyKey != "k" || rs[2].Job.Priority != 5 {
		t.Errorf("the jobs read back: %+v, %+v", rs[1].Job, rs[2].Job)
	}
	n, order := acceptedEvents(t, db)
	if len(order) != 3 || order[0] != "a" || order[1] != "b" || order[2] != "c" || n["a"] != 1 {
		t.Errorf("accepted events in order %v, want a b c once each", order)
	}
}

// TestEnqueueBatchConflictsInOneGroup: one group holds a repeated key, a reused key with
// another body, an id used earlier in the same group, an id and a key of committed jobs,
// arguments the server refuses, and plain jobs. The one INSERT of the group is refused
// and rolled back; each job then goes in alone: each refused call is answered alone, as
// a call alone would be, and the others commit, each with one event.
func TestEnqueueBatchConflictsInOneGroup(t *testing.T) {
	old := store.NewJob{ID: "old", Kind: "test", Args: json.RawMessage(`{}`), MaxAttempts: 3, IdempotencyKey: "old-key", RequestHash: "h"}
	rs, db, whole := enqueueGroup(t, []store.NewJob{old},
		store.NewJob{ID: "a", IdempotencyKey: "k1", RequestHash: "h1"},                            // 0: new
		store.NewJob{ID: "b", IdempotencyKey: "k1", RequestHash: "h1"},                            // 1: a's key, same body: existed
		store.NewJob{ID: "c", IdempotencyKey: "k1", RequestHash: "h2"},                            // 2: a's key, another body: mismatch
		store.NewJob{ID: "a", Kind: "test", Args: json.RawMessage(`{"other":1}`), MaxAttempts: 3}, // 3: a's id: conflict
		store.NewJob{ID: "old"}, // 4: a committed job's id: conflict
		store.NewJob{ID: "d", IdempotencyKey: "old-key", RequestHash: "h"}, // 5: a committed job's key: existed
		store.NewJob{ID: "e"}, // 6: new
		store.NewJob{ID: "bad", Kind: "test", Args: json.RawMessage("{\"a\":\"\xff\"}"), MaxAttempts: 3}, // 7: not UTF-8: refused
		store.NewJob{ID: "f", IdempotencyKey: "k2", RequestHash: "h"},                                    // 8: new
	)
	if whole != 0 {
		t.Errorf("the group went in with one INSERT: the server took rows it must refuse")
	}
	for _, i := range []int{0, 6, 8} {
		if r := rs[i]; r.Err != nil || r.Existed || r.Job.Status != store.StatusPending {
			t.Errorf("call %d: %+v; want a new job", i, r)
		}
	}
	if r := rs[1]; r.Err != nil || !r.Existed || r.Job.ID != "a" {
		t.Errorf("repeated key: %+v; want a, existed", r)
	}
	if r := rs[2]; !errors.Is(r.Err, store.ErrIdempotencyMismatch) || r.Job.ID != "a" {
		t.Errorf("reused key, other body: %+v; want a, ErrIdempotencyMismatch", r)
	}
	for _, i := range []int{3, 4} {
		if r := rs[i]; !errors.Is(r.Err, store.ErrConflict) {
			t.Errorf("call %d (id in use): %+v, want ErrConflict", i, r)
		}
	}
	if r := rs[5]; r.Err != nil || !r.Existed || r.Job.ID != "old" {
		t.Errorf("committed key: %+v; want old, existed", r)
	}
	if r := rs[7]; !errors.Is(r.Err, store.ErrUnstorable) {
		t.Errorf("args not UTF-8: %+v, want ErrUnstorable", r)
	}
	n, order := acceptedEvents(t, db)
	want := map[string]int{"old": 1, "a": 1, "e": 1, "f": 1}
	for _, id := range []string{"old", "a", "b", "c", "d", "e", "f", "bad"} {
		if n[id] != want[id] {
			t.Errorf("job %s has %d accepted events, want %d (events in order %v)", id, n[id], want[id], order)
		}
	}
	var jobs int
	if err := db.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&jobs); err != nil || jobs != 4 {
		t.Errorf("%d jobs stored (%v), want old, a, e and f", jobs, err)
	}
}
