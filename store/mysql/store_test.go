package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest/mysqltest"
)

// TestNodesStartingTogetherMigrateOnce: stores opened at once on a fresh database, as
// nodes that start together, all open (GET_LOCK), and each migration is applied once.
func TestNodesStartingTogetherMigrateOnce(t *testing.T) {
	dsn := mysqltest.FreshDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const nodes = 6
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stores []*store.Store
		errs   []error
	)
	start := make(chan struct{})
	for range nodes {
		wg.Go(func() {
			<-start
			st, err := mysql.Open(ctx, dsn, mysql.Options{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			stores = append(stores, st)
		})
	}
	close(start)
	wg.Wait()
	for _, st := range stores {
		defer st.Close()
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d opens failed: %v", len(errs), nodes, errs)
	}
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, versions int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != len(files) || versions != len(files) {
		t.Fatalf("schema_migrations has %d rows of %d versions, want %d once each", rows, versions, len(files))
	}
	for i, st := range stores {
		if _, err := st.EventsAfter(ctx, 0, 1); err != nil {
			t.Fatalf("store %d: %v", i, fmt.Errorf("read: %w", err))
		}
	}
}

// TestFaultKinds: the server's error numbers and the driver's connection errors map to
// the core's kinds (rule 23).
func TestFaultKinds(t *testing.T) {
	var d mysql.Store
	for _, c := range []struct {
		err  error
		want error
	}{
		{&gomysql.MySQLError{Number: 1205}, store.ErrBusy},
		{&gomysql.MySQLError{Number: 1213}, store.ErrBusy},
		{&gomysql.MySQLError{Number: 3572}, store.ErrBusy},
		{&gomysql.MySQLError{Number: 1021}, store.ErrDiskFull},
		{&gomysql.MySQLError{Number: 1114, Message: "The table 'jobs' is full"}, store.ErrDiskFull},
		{&gomysql.MySQLError{Number: 1030, Message: "Got error 28 \"No space left on device\" from storage engine InnoDB"}, store.ErrDiskFull},
		{&gomysql.MySQLError{Number: 1030, Message: "Got error 5 from storage engine"}, store.ErrIO},
		{&gomysql.MySQLError{Number: 1290}, store.ErrReadOnly},
		{&gomysql.MySQLError{Number: 1792}, store.ErrReadOnly},
		{&gomysql.MySQLError{Number: 1836}, store.ErrReadOnly},
		{&gomysql.MySQLError{Number: 1877}, store.ErrCorrupt},
		{&gomysql.MySQLError{Number: 1040}, store.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1053}, store.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1927}, store.ErrUnavailable},
		{fmt.Errorf("claim: %w", gomysql.ErrInvalidConn), store.ErrUnavailable},
		{io.ErrUnexpectedEOF, store.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1062}, nil},
		{errors.New("other"), nil},
	} {
		if got := d.Fault(c.err); got != c.want {
			t.Errorf("Fault(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestUnreachableServerIsUnavailable: a server that does not answer is
// store.ErrUnavailable, through the core.
func TestUnreachableServerIsUnavailable(t *testing.T) {
	dsn := mysqltest.FreshDatabase(t)
	st, err := mysql.Open(context.Background(), dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Kill every connection of the pool from another session: the next statement on
	// one of them meets a connection the server closed.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		db.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
	}
	// database/sql retries a connection that failed before the statement was sent; a
	// statement on a killed connection either works on a fresh one or is unavailable.
	if _, err := st.Get(ctx, "nothing"); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("get after the server closed the connections: %v, want ErrNotFound or ErrUnavailable", err)
	}
	cfg, _ := gomysql.ParseDSN(dsn)
	cfg.Addr, cfg.Timeout = "127.0.0.1:1", time.Second // nothing listens there
	if _, err := mysql.Open(ctx, cfg.FormatDSN(), mysql.Options{}); err == nil || !mysql.IsUnavailable(err) {
		t.Fatalf("open of a closed port: %v, want unavailable", err)
	}
}

// TestTextThatIsNotUTF8: args that are not UTF-8 are store.ErrUnstorable, refused alone
// in their group; an error message that is not UTF-8 (a run's text) is stored with
// U+FFFD in place of the bad bytes.
func TestTextThatIsNotUTF8(t *testing.T) {
	st, _ := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: []byte("{\"a\":\"\xff\"}")})
	if !errors.Is(err, store.ErrUnstorable) {
		t.Fatalf("enqueue of args that are not UTF-8: %v, want ErrUnstorable", err)
	}
	id := enqueue(t, st)
	jobs, err := st.ClaimBatch(ctx, "w", store.DefaultQueue, 1)
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	j, err := st.Fail(ctx, id, jobs[0].Attempt, store.AttemptError{Code: "x", Message: "bad \xff byte\x00", Permanent: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "bad \uFFFD byte\x00"; j.ErrorMessage != want {
		t.Fatalf("error message %q, want %q", j.ErrorMessage, want)
	}
}

// TestParseURL: mysql:// and mariadb:// URLs become go-sql-driver DSNs.
func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"mysql://u:p%40ss@db.example:3307/sheetq":         "u:p@ss@tcp(db.example:3307)/sheetq",
		"mariadb://u:p@db.example/sheetq?tls=skip-verify": "u:p@tcp(db.example:3306)/sheetq?tls=skip-verify",
	} {
		got, err := mysql.ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"mysql://u:secret@host", "postgres://u:secret@host/db", "mysql://u:secret@/db"} {
		_, err := mysql.ParseURL(bad)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): %v, want an error without the password", bad, err)
		}
	}
}

// TestProbeWriteNamesARefusedWrite: a session that may not write (here a read-only
// transaction default, as a replica or read_only=ON refuse writes) fails the probe as
// store.ErrReadOnly, which /readyz names; reads still work.
func TestProbeWriteNamesARefusedWrite(t *testing.T) {
	_, dsn := openStore(t) // migrated
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ro, err := mysql.OpenDriver(ctx, dsn+"?tx_read_only=1", mysql.Options{})
	if err != nil {
		t.Fatalf("open with a read-only session: %v", err)
	}
	defer ro.Close()
	err = ro.ProbeWrite(ctx)
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("probe on a read-only session: %v, want ErrReadOnly", err)
	}
	if _, err := ro.EventHead(ctx); err != nil {
		t.Fatalf("a read on a read-only session: %v", err)
	}
}

// TestPausedHolderOfTheEventClock: a node stopped (SIGSTOP) between its events and its
// COMMIT holds the event clock's row lock, which every transaction that writes an event
// takes. The server closes a connection idle for wait_timeout (the store's Config sets
// it below innodb_lock_wait_timeout), so another node's enqueue waits for the lock and
// then gets it, instead of failing busy for as long as the pause lasts; the paused
// transaction is rolled back, its events never committed.
func TestPausedHolderOfTheEventClock(t *testing.T) {
	dsn := mysqltest.FreshDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := mysql.Open(ctx, dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// The paused node: a connection with the store's own session settings, in a
	// transaction that has appended an event under the clock's lock, then says nothing.
	cfg, err := mysql.Config(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	paused := sql.OpenDB(conn)
	defer paused.Close()
	tx, err := paused.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE event_clock SET n = n + 1 WHERE one = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt) VALUES ('ghost', UTC_TIMESTAMP(6), 'paused', 'PENDING', 1)`); err != nil {
		t.Fatal(err)
	}

	// Another node's enqueue writes an event: it needs the lock the paused one holds.
	j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: []byte(`{}`)})
	if err != nil {
		t.Fatalf("enqueue while a paused transaction holds the event clock: %v (the server did not close the idle connection before the lock wait timed out)", err)
	}
	if got, err := st.Get(ctx, j.ID); err != nil || got.Status != store.StatusPending {
		t.Fatalf("the job: %+v, %v", got, err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("the paused transaction committed after the server closed its connection")
	}
	var ghosts int
	if err := paused.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_events WHERE job_id = 'ghost'`).Scan(&ghosts); err != nil {
		t.Fatal(err)
	}
	if ghosts != 0 {
		t.Fatalf("%d events of the paused transaction committed", ghosts)
	}
}
