package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

var ctx = context.Background()

func openStore(t *testing.T, dsn string, opts pg.Options) *store.Store {
	t.Helper()
	st, err := pg.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func enqueue(t *testing.T, st *store.Store) store.Job {
	t.Helper()
	j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), NotifyURL: "https://example.com/hook"})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return j
}

// TestHeartbeatIsHOT: a heartbeat changes no indexed column, so PostgreSQL updates the
// row in place on its page (a heap-only tuple) and writes no index entry. The counts come
// from pg_stat_user_tables, which a backend reports when it exits: the store is closed,
// then the test waits for the figures to arrive.
func TestHeartbeatIsHOT(t *testing.T) {
	dsn := freshSchema(t)
	st, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, st)
	j, err := st.ClaimBatch(ctx, "w1", store.DefaultQueue, 1)
	if err != nil || len(j) != 1 {
		t.Fatalf("claim: %v, %v", j, err)
	}
	const beats = 20
	for i := range beats {
		if _, err := st.Heartbeat(ctx, j[0].ID, j[0].Attempt, int64(i), -1); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// One update by the claim (it changes status, which the partial indexes name, so it
	// cannot be HOT), then the heartbeats.
	var upd, hot int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = 'jobs'::regclass`).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		if upd >= 1+beats {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the statistics show %d updates of jobs, want %d", upd, 1+beats)
		}
	}
	if hot != beats {
		t.Fatalf("%d of %d updates were HOT, want the %d heartbeats", hot, upd, beats)
	}
}

// TestFinishBatchPastSubtransactionCache: a batch larger than the 64 subtransactions
// PostgreSQL caches per backend, with one end whose follow-up hook fails in the middle:
// that end alone is refused and stays PROCESSING; every other end commits, and each
// Publish ran once.
func TestFinishBatchPastSubtransactionCache(t *testing.T) {
	dsn := freshSchema(t)
	var failFor string
	hook := func(j store.Job) ([]store.FollowUp, error) {
		if j.ID == failFor {
			return nil, errors.New("hook refuses")
		}
		return nil, nil
	}
	st := openStore(t, dsn, pg.Options{FollowUps: hook})
	const n = 100
	for range n {
		enqueue(t, st)
	}
	claimed, err := st.ClaimBatch(ctx, "w1", store.DefaultQueue, n)
	if err != nil || len(claimed) != n {
		t.Fatalf("claim batch = %d jobs, %v", len(claimed), err)
	}
	failFor = claimed[n/2].ID
	published := make([]int, n)
	fs := make([]store.Finish, n)
	for i, j := range claimed {
		fs[i] = store.Finish{ID: j.ID, Attempt: j.Attempt, Outcome: store.Succeeded,
			Publish: func() error { published[i]++; return nil }}
	}
	res := st.FinishBatch(ctx, fs)
	for i, r := range res {
		if i == n/2 {
			if r.Err == nil {
				t.Fatalf("end %d: committed although its hook failed", i)
			}
			continue
		}
		if r.Err != nil || r.Job.Status != store.StatusSucceeded {
			t.Fatalf("end %d: %s, %v", i, r.Job.Status, r.Err)
		}
		if published[i] != 1 {
			t.Fatalf("end %d published %d times", i, published[i])
		}
	}
	if j, err := st.Get(ctx, failFor); err != nil || j.Status != store.StatusProcessing {
		t.Fatalf("the refused end's job: %s, %v; want PROCESSING", j.Status, err)
	}
}

// TestStampsAreTheDatabaseClock: without a test clock the store stamps with now() of
// the database, whatever the node's clock says.
func TestStampsAreTheDatabaseClock(t *testing.T) {
	st, conn := storeWithConn(t)
	var before, after time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, st)
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if j.CreatedAt.Before(before) || j.CreatedAt.After(after) || !j.RunAt.Equal(j.CreatedAt) {
		t.Fatalf("created %v, run at %v; want the database's time, between %v and %v", j.CreatedAt, j.RunAt, before, after)
	}
}

// TestNowIsTheDatabaseClockOnANodeThatIsOff: a node whose clock is 90 s ahead still
// reads the database's time from Now (its pages' ages and the stats' windows), since the
// store measures the offset and takes it back out.
func TestNowIsTheDatabaseClockOnANodeThatIsOff(t *testing.T) {
	st := openStore(t, freshSchema(t), pg.Options{})
	if err := pg.SetLocalClock(t.Context(), st, func() time.Time { return time.Now().Add(90 * time.Second) }); err != nil {
		t.Fatal(err)
	}
	db, err := pg.DatabaseClock(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	// The node's clock says 90 s later; Now must say the database's time, give or take
	// the round trips of this test on a busy machine, far below the 90 s it is off by.
	if d := st.Now().Sub(db); d < -10*time.Second || d > 10*time.Second {
		t.Fatalf("Now is %v off the database clock on a node 90 s ahead, want the database's time", d)
	}
}

// TestCutConnectionIsUnavailable: whatever a cut connection makes a call return (an EOF
// on a pooled connection, a refused new one), IsUnavailable says so, so that the API
// answers 503 store_unavailable and not a 500; a query the server refuses is not.
func TestCutConnectionIsUnavailable(t *testing.T) {
	proxy, via := pgtest.NewProxy(t, freshSchema(t))
	st := openStore(t, via, pg.Options{})
	j := enqueue(t, st)
	if _, err := st.Get(ctx, "no-such-job"); pg.IsUnavailable(err) {
		t.Fatalf("a missing job is unavailable: %v", err)
	}
	// A statement in flight when the connection breaks: its outcome is unknown to the
	// node (pgx says "unexpected EOF"), and that too is the database not answering.
	inFlight := make(chan error, 1)
	go func() { inFlight <- pg.Exec(ctx, st, `SELECT pg_sleep(30)`) }()
	waitSleeping(t)
	proxy.Cut()
	if err := <-inFlight; err == nil || !pg.IsUnavailable(err) {
		t.Errorf("a statement in flight when the connection was cut: %v, want an error IsUnavailable recognises", err)
	}
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := st.Get(ctx, j.ID); return err }},
		{"enqueue", func() error {
			_, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "k", Args: json.RawMessage(`{}`)})
			return err
		}},
		{"claim", func() error { _, err := st.ClaimBatch(ctx, "w", store.DefaultQueue, 1); return err }},
		{"ping", func() error { return st.Ping(ctx) }},
	} {
		if err := call.do(); err == nil || !pg.IsUnavailable(err) {
			t.Errorf("%s with the connection cut: %v, want an error IsUnavailable recognises", call.name, err)
		}
	}
}

// waitSleeping waits until a session of the test's database runs pg_sleep.
func waitSleeping(t *testing.T) {
	t.Helper()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(waitTimeout)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' AND state = 'active'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestErrorKinds: which errors mean "the database does not answer" (503, retry) and
// which a conflict a retry resolves, as the server and pgx report them, including the
// "unexpected EOF" of a connection that broke while a statement was in flight (seen
// under load in app.TestPostgresOutageAnswers503).
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err               error
		unavailable, busy bool
	}{
		{fmt.Errorf("enqueue: %w", io.ErrUnexpectedEOF), true, false},
		{fmt.Errorf("read: %w", io.EOF), true, false},
		{&pgconn.PgError{Code: "57P01"}, true, false},  // admin_shutdown
		{&pgconn.PgError{Code: "08006"}, true, false},  // connection_failure
		{&pgconn.PgError{Code: "53300"}, true, false},  // too_many_connections
		{&pgconn.PgError{Code: "40001"}, false, true},  // serialization_failure
		{&pgconn.PgError{Code: "40P01"}, false, true},  // deadlock_detected
		{&pgconn.PgError{Code: "23505"}, false, false}, // unique_violation: a bug, not an outage
		{store.ErrNotFound, false, false},
		{nil, false, false},
	} {
		if got := pg.IsUnavailable(tc.err); got != tc.unavailable {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.unavailable)
		}
		if got := pg.IsBusy(tc.err); got != tc.busy {
			t.Errorf("IsBusy(%v) = %v, want %v", tc.err, got, tc.busy)
		}
	}
}
