package store_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest/conformance"
)

// The conformance suite is only as good as what it catches. Each mutant below breaks one
// rule, either in the core (store.SetMutant: a rule kept above the drivers) or in a
// driver (a wrapper around the real SQLite driver that misbehaves the way a careless
// driver would), and TestConformanceCatchesMutants runs the whole suite against each,
// in a process of its own, and wants it to fail.

// coreMutants are the rules the core keeps above the drivers (store/core.go).
var coreMutants = []string{
	"no-job-checks",           // an Enqueue without a kind, or with a priority out of range, reaches the driver
	"no-job-defaults",         // no default budget or queue
	"no-claim-checks",         // a claim without a queue or of -1 jobs reaches the driver
	"no-retry-budget",         // Retry(0) gives no attempts
	"no-read-limits",          // a read without a limit reads nothing
	"no-schedule-checks",      // a schedule without a cron is stored
	"no-follow-up-checks",     // the kind's follow-ups go in unchecked and without defaults
	"follow-ups-of-any-state", // the hook is asked at a requeue too
	"cancel-of-any-state",     // a finished job is "canceled" again
	"retry-of-any-state",      // a SUCCEEDED job is retried
	"expire-of-any-state",     // a FAILED job is expired
	"delete-of-unfinished",    // a PENDING job is deleted
	"no-audit-checks",         // an audit entry without an actor is written
}

// driverMutants break a driver's rules: their names say how.
var driverMutants = map[string]func(d store.Driver) store.Driver{
	"heartbeat-hides-a-lost-lease": func(d store.Driver) store.Driver { return &hidesLostLease{Driver: d} },
	"enqueue-forgets-keys":         func(d store.Driver) store.Driver { return &forgetsKeys{Driver: d} },
	"claim-loses-a-job":            func(d store.Driver) store.Driver { return &losesClaims{Driver: d} },
	"events-out-of-order":          func(d store.Driver) store.Driver { return &reversesEvents{Driver: d} },
	"no-follow-ups":                func(d store.Driver) store.Driver { return &dropsFollowUps{Driver: d} },
	"schedule-fires-twice":         func(d store.Driver) store.Driver { return &firesTwice{Driver: d} },
	"cancel-does-nothing":          func(d store.Driver) store.Driver { return &ignoresCancel{Driver: d} },
	"stale-ignores-age":            func(d store.Driver) store.Driver { return &staleIgnoresAge{Driver: d} },
	"audit-oldest-first":           func(d store.Driver) store.Driver { return &auditOldestFirst{Driver: d} },
}

// TestConformanceCatchesMutants runs the suite (Run, RunReads, RunSchedules) on the
// SQLite driver once per mutant, each in a child process of this test binary
// (TestMutant), and fails if the suite passes any of them.
func TestConformanceCatchesMutants(t *testing.T) {
	if os.Getenv("SHEETQ_MUTANT") != "" {
		t.Skip("inside a mutant's run")
	}
	names := slices.Concat(coreMutants, slices.Sorted(func(yield func(string) bool) {
		for n := range driverMutants {
			if !yield(n) {
				return
			}
		}
	}))
	run := func(t *testing.T, name string) ([]byte, error) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutant$", "-test.count=1", "-test.failfast")
		cmd.Env = append(os.Environ(), "SHEETQ_MUTANT="+name)
		return cmd.CombinedOutput()
	}
	// The control: the same run with nothing broken passes, so that a mutant's failure
	// is the mutant's.
	if out, err := run(t, "none"); err != nil {
		t.Fatalf("the suite fails the unbroken store in a child process (%v):\n%s", err, tail(out))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := run(t, name)
			if err == nil {
				t.Fatalf("the conformance suite passed a store with mutant %q:\n%s", name, tail(out))
			}
			if !strings.Contains(string(out), "--- FAIL: TestMutant/") {
				t.Fatalf("mutant %q: the run failed without a failing case of the suite (%v):\n%s", name, err, tail(out))
			}
		})
	}
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 3000 {
		s = "..." + s[len(s)-3000:]
	}
	return s
}

// TestMutant is the suite on one mutant, SHEETQ_MUTANT; it runs only as
// TestConformanceCatchesMutants's child.
func TestMutant(t *testing.T) {
	name := os.Getenv("SHEETQ_MUTANT")
	if name == "" {
		t.Skip("run by TestConformanceCatchesMutants")
	}
	wrap := driverMutants[name]
	switch {
	case name == "none":
		wrap = func(d store.Driver) store.Driver { return d }
	case wrap == nil:
		if !slices.Contains(coreMutants, name) {
			t.Fatalf("unknown mutant %q", name)
		}
		store.SetMutant(name)
		wrap = func(d store.Driver) store.Driver { return d }
	}
	harness := func(t *testing.T, o conformance.Options) conformance.Harness {
		var mu sync.Mutex
		now := time.Now().UTC().Truncate(time.Millisecond)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
		path := filepath.Join(t.TempDir(), "sheetq.db")
		return conformance.Driven(t, o, func(t *testing.T) store.Driver {
			d, err := sqlite.OpenDriver(context.Background(), path, sqlite.Options{Now: clock})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			return wrap(d)
		}, clock, advance)
	}
	t.Run("Run", func(t *testing.T) { conformance.Run(t, harness) })
	t.Run("RunReads", func(t *testing.T) { conformance.RunReads(t, harness) })
	t.Run("RunSchedules", func(t *testing.T) { conformance.RunSchedules(t, harness) })
	t.Run("RunAudit", func(t *testing.T) { conformance.RunAudit(t, harness) })
}

// hidesLostLease answers a heartbeat of an attempt that lost the job as if it held it.
type hidesLostLease struct{ store.Driver }

func (m *hidesLostLease) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (bool, error) {
	c, err := m.Driver.Heartbeat(ctx, id, attempt, rows, total)
	if err != nil && strings.Contains(err.Error(), store.ErrLeaseLost.Error()) {
		return false, nil
	}
	return c, err
}

// forgetsKeys answers an Enqueue whose idempotency key has a job as a new job.
type forgetsKeys struct{ store.Driver }

func (m *forgetsKeys) EnqueueBatch(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	rs, err := m.Driver.EnqueueBatch(ctx, njs)
	for i := range rs {
		if rs[i].Existed {
			rs[i].Existed, rs[i].Err = false, nil
		}
	}
	return rs, err
}

// losesClaims claims as asked but answers without the last job taken, which stays
// PROCESSING with nobody running it.
type losesClaims struct{ store.Driver }

func (m *losesClaims) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]store.Job, error) {
	js, err := m.Driver.ClaimBatch(ctx, worker, queue, limit)
	if len(js) > 1 {
		js = js[:len(js)-1]
	}
	return js, err
}

// reversesEvents hands out each page of the log backwards.
type reversesEvents struct{ store.Driver }

func (m *reversesEvents) EventsAfter(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	evs, err := m.Driver.EventsAfter(ctx, after, limit)
	slices.Reverse(evs)
	return evs, err
}

func (m *reversesEvents) EventsSince(ctx context.Context, cursor string, limit int) ([]store.CursorEvent, string, error) {
	evs, next, err := m.Driver.EventsSince(ctx, cursor, limit)
	slices.Reverse(evs)
	return evs, next, err
}

// dropsFollowUps never asks the hook it was given.
type dropsFollowUps struct{ store.Driver }

func (m *dropsFollowUps) SetFollowUps(store.FollowUpFunc) {
	m.Driver.SetFollowUps(func(store.Job) ([]store.FollowUp, error) { return nil, nil })
}

// firesTwice reports a firing that another node made first as its own.
type firesTwice struct{ store.Driver }

func (m *firesTwice) FireSchedule(ctx context.Context, f store.Firing) (store.Job, bool, error) {
	j, _, err := m.Driver.FireSchedule(ctx, f)
	return j, err == nil, err
}

// ignoresCancel answers a cancel with the job as it is.
type ignoresCancel struct{ store.Driver }

func (m *ignoresCancel) Cancel(ctx context.Context, id string) (store.Job, error) {
	return m.Driver.Get(ctx, id)
}

// staleIgnoresAge finds every running job stale, however fresh its heartbeat.
type staleIgnoresAge struct{ store.Driver }

func (m *staleIgnoresAge) Stale(ctx context.Context, _ time.Duration) ([]store.Job, error) {
	return m.Driver.Stale(ctx, 0)
}

// auditOldestFirst hands out each page of the audit log oldest first.
type auditOldestFirst struct{ store.Driver }

func (m *auditOldestFirst) AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	es, err := m.Driver.AuditLog(ctx, f)
	slices.Reverse(es)
	return es, err
}
