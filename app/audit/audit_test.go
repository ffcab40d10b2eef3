package audit_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/pg"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
	"sheetq/store/storetest/mysqltest"
	"sheetq/store/storetest/pgtest"
)

// Each test runs on a migrated SQLite file in t.TempDir() and on a schema of its own on
// SHEETQ_TEST_POSTGRES_DSN (skipped without it), each with a clock the test moves.
type opened struct {
	st    *store.Store
	clock *storetest.Clock
}

func eachStore(t *testing.T, fn func(t *testing.T, o opened)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		clk := storetest.ClockAt(time.Now().UTC().Truncate(time.Millisecond))
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sheetq.db"), sqlite.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, opened{st, clk})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.FreshSchema(t)
		clk := storetest.ClockAt(time.Now().UTC().Truncate(time.Millisecond))
		st, err := pg.Open(context.Background(), dsn, pg.Options{TestClock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, opened{st, clk})
	})
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		dsn := mysqltest.FreshDatabase(t)
		clk := storetest.ClockAt(time.Now().UTC().Truncate(time.Millisecond))
		st, err := mysql.Open(context.Background(), dsn, mysql.Options{TestClock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, opened{st, clk})
	})
}

func entries(t *testing.T, l *audit.Log, f store.AuditFilter) []store.AuditEntry {
	t.Helper()
	es, err := l.Entries(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestRecordNamesTheActorAndTheAddress: Record writes the request's identity as the
// actor ("local" for the local admin) and the client's address as the middleware
// saw it, through a real middleware stack.
func TestRecordNamesTheActorAndTheAddress(t *testing.T) {
	eachStore(t, func(t *testing.T, o opened) {
		log := apptest.Logger(t, nil)
		l := audit.New(o.st, log)
		mw, err := middleware.New(middleware.Config{Loopback: true, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			if name := r.URL.Query().Get("as"); name != "" {
				ctx = access.With(ctx, access.Who{Name: name, Kind: access.Person, Role: access.Member})
			}
			if err := l.Record(ctx, audit.FileDownloaded, audit.Entry{Job: "j1", Report: "sales", Detail: "streamed"}); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
		}), nil)
		c := apptest.Serve(t, h)
		for _, path := range []string{"/?as=ann@example.com", "/"} {
			if res := c.Get(path); res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Body)
			}
		}
		es := entries(t, l, store.AuditFilter{})
		if len(es) != 2 {
			t.Fatalf("%d entries, want 2", len(es))
		}
		for i, actor := range []string{audit.LocalActor, "ann@example.com"} {
			e := es[i]
			if e.Actor != actor || e.Action != audit.FileDownloaded || e.Job != "j1" || e.Report != "sales" ||
				e.Detail != "streamed" || e.IP != "127.0.0.1" || !e.At.Equal(o.clock.Now()) {
				t.Errorf("entry %d = %+v; want actor %s from 127.0.0.1 at %v", i, e, actor, o.clock.Now())
			}
		}
	})
}

// TestRecordAsKeepsWhatItCan: RecordAs names its actor ("" is anonymous), and what a
// caller passes is made storable rather than refused: text cut to its bound, NULs and
// stray bytes replaced.
func TestRecordAsKeepsWhatItCan(t *testing.T) {
	eachStore(t, func(t *testing.T, o opened) {
		l := audit.New(o.st, apptest.Logger(t, nil))
		ctx := context.Background()
		if err := l.RecordAs(ctx, "bob@example.com", audit.SignIn, audit.Entry{}); err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("ü", 3000)
		if err := l.RecordAs(ctx, "", audit.SignInFailed, audit.Entry{Detail: "bad\x00token \xff " + long, Report: strings.Repeat("r", 400)}); err != nil {
			t.Fatal(err)
		}
		es := entries(t, l, store.AuditFilter{})
		if len(es) != 2 || es[1].Actor != "bob@example.com" || es[1].Action != audit.SignIn || es[1].IP != "" {
			t.Fatalf("entries %+v", es)
		}
		e := es[0]
		if e.Actor != audit.AnonymousActor || e.Action != audit.SignInFailed ||
			!strings.HasPrefix(e.Detail, "bad\uFFFDtoken \uFFFD ü") || utf8.RuneCountInString(e.Detail) != store.AuditDetailMax ||
			!strings.HasSuffix(e.Detail, "…") || utf8.RuneCountInString(e.Report) != store.AuditFieldMax {
			t.Fatalf("cleaned entry = %q / %q (%d runes)", e.Actor, e.Detail[:20], utf8.RuneCountInString(e.Detail))
		}
	})
}

// TestRecordFailsWhenTheStoreCannotWrite: an entry that cannot be written is an error
// for the caller, which then refuses its action.
func TestRecordFailsWhenTheStoreCannotWrite(t *testing.T) {
	eachStore(t, func(t *testing.T, o opened) {
		var logged apptest.SyncBuffer
		l := audit.New(o.st, slog.New(slog.NewTextHandler(&logged, nil)))
		if err := o.st.Close(); err != nil {
			t.Fatal(err)
		}
		err := l.Record(context.Background(), audit.ExportDeleted, audit.Entry{Job: "j1"})
		if err == nil {
			t.Fatal("Record on a closed store returned no error")
		}
		if !strings.Contains(logged.String(), "audit entry not written") {
			t.Errorf("the failure was not logged: %s", logged.String())
		}
	})
}

// TestPruneKeepsRecentAndDropsOld: the pruning loop removes, at once and in batches,
// every entry older than keep by the store's clock, keeps the rest, and ends with its
// context; keep 0 keeps everything.
func TestPruneKeepsRecentAndDropsOld(t *testing.T) {
	eachStore(t, func(t *testing.T, o opened) {
		l := audit.New(o.st, apptest.Logger(t, nil))
		ctx := context.Background()
		now := o.clock.Now()
		const old = 1100 // more than one batch
		for i := range old {
			if _, err := o.st.Audit(ctx, store.AuditEntry{Actor: "ann", Action: audit.SignIn, At: now.Add(-time.Duration(i+1) * time.Minute).Add(-400 * 24 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		var recent []int64
		for i := range 3 {
			e, err := o.st.Audit(ctx, store.AuditEntry{Actor: "ann", Action: audit.ExportRequested, At: now.Add(-time.Duration(i) * 24 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			recent = append(recent, e.Seq)
		}
		l.Prune(ctx, 0) // keeps everything, and returns at once
		if n := len(entries(t, l, store.AuditFilter{Limit: 1000})); n != 1000 {
			t.Fatalf("keep 0 pruned: %d entries on the first page", n)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Prune(pctx, 9600*time.Hour)
		}()
		apptest.WaitFor(t, 30*time.Second, func() (bool, string) {
			es, err := l.Entries(ctx, store.AuditFilter{Limit: 1000})
			if err != nil {
				return false, err.Error()
			}
			return len(es) == len(recent), fmt.Sprintf("%d entries left, want %d", len(es), len(recent))
		})
		cancel()
		<-done
		es := entries(t, l, store.AuditFilter{})
		for i, e := range es {
			if e.Seq != recent[len(recent)-1-i] {
				t.Fatalf("left %+v, want the recent entries %v", es, recent)
			}
		}
	})
}

// TestCursor: a cursor reads back as the Seq it was made from; anything else is refused.
func TestCursor(t *testing.T) {
	for _, seq := range []int64{1, 42, 1 << 50} {
		if got, ok := audit.ParseCursor(audit.EncodeCursor(seq)); !ok || got != seq {
			t.Errorf("cursor of %d reads %d, %v", seq, got, ok)
		}
	}
	for _, c := range []string{"", "!!", audit.EncodeCursor(0), audit.EncodeCursor(-3), "MTIzYQ"} {
		if _, ok := audit.ParseCursor(c); ok {
			t.Errorf("cursor %q accepted", c)
		}
	}
	if !audit.IsAction(audit.Forbidden) || audit.IsAction("nope") || len(audit.Actions) != 9 {
		t.Error("the actions are not the nine of docs/api.md")
	}
}
