package mysql_test

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest/mysqltest"
)

// openStore opens a store on a database of the test's own, on the database's clock.
func openStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	dsn := mysqltest.FreshDatabase(t)
	st, err := mysql.Open(context.Background(), dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dsn
}

// enqueue adds a PENDING job and returns its id.
func enqueue(t testing.TB, st *store.Store) string {
	t.Helper()
	j, _, err := st.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: "test", Args: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// TestAutoIncrementCommitsOutOfOrder shows the hazard the store's cursor is built
// against: two transactions that insert into job_events as a naive writer would (no
// event clock), the first taking the lower id and committing last. A reader that keeps
// "id > last seen" as its cursor never sees the first one's event.
func TestAutoIncrementCommitsOutOfOrder(t *testing.T) {
	st, dsn := openStore(t)
	id := enqueue(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	head, err := st.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const insert = `INSERT INTO job_events (job_id, at, type, status, attempt) VALUES (?, UTC_TIMESTAMP(6), ?, 'PENDING', 0)`
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	if _, err := first.ExecContext(ctx, insert, id, "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, insert, id, "second"); err != nil { // commits on its own
		t.Fatal(err)
	}
	evs, cursor, err := st.EventsSince(ctx, head, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "second" {
		t.Fatalf("read while the first is open: %v, want the second alone", evs)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if evs, _, err = st.EventsSince(ctx, cursor, 10); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("a naive writer's late event was found after a later cursor: %v; the hazard did not happen", evs)
	}
	// The store's own writers never do this: TestTailerSeesEventCommittedLate.
}

// TestTailerSeesEventCommittedLate: one transaction of the store appends an event and
// stays open before its COMMIT; a second appends a later one. The second cannot commit
// first (it waits for the event clock, events.go), a tailer reading meanwhile gets
// neither, and once the first commits the tailer delivers both, in order, once each.
func TestTailerSeesEventCommittedLate(t *testing.T) {
	st, _ := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := enqueue(t, st), enqueue(t, st)
	head, err := st.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	inside, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	unset := mysql.SetAfterFlush(func() {
		if held.CompareAndSwap(false, true) { // only the first transaction waits
			close(inside)
			<-release
		}
	})
	defer unset()

	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { _, errA = st.Cancel(ctx, a) }) // PENDING: canceled at once, one event
	<-inside
	secondDone := make(chan struct{})
	wg.Go(func() {
		defer close(secondDone)
		errB = st.AppendEvent(ctx, b, "note", nil)
	})

	// The second waits for the first; the tailer sees nothing of either.
	select {
	case <-secondDone:
		t.Fatalf("the second transaction committed while the first held the event clock (err %v)", errB)
	case <-time.After(300 * time.Millisecond):
	}
	evs, cursor, err := st.EventsSince(ctx, head, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 || cursor != head {
		t.Fatalf("read while the first is open: %v (cursor %q), want nothing", evs, cursor)
	}

	close(release)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("cancel: %v; append: %v", errA, errB)
	}
	var got []store.CursorEvent
	for range 3 {
		evs, next, err := st.EventsSince(ctx, cursor, 1) // one at a time: each cursor is used
		if err != nil {
			t.Fatal(err)
		}
		got, cursor = append(got, evs...), next
	}
	if len(got) != 2 || got[0].JobID != a || got[0].Type != store.EventCanceled || got[1].JobID != b || got[1].Type != "note" {
		t.Fatalf("delivered %v, want a's canceled then b's note, once each", got)
	}
	if store.CompareCursors(got[0].Cursor, got[1].Cursor) >= 0 {
		t.Fatalf("cursors %q, %q out of order", got[0].Cursor, got[1].Cursor)
	}
}
