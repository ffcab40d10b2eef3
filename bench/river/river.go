package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", the one River tests with
)

// riverVariant is River with its SQLite driver, set up as River's SQLite docs say: WAL and
// one open connection (SQLite takes one writer; River's own test helper does the same).
// synchronous=FULL is explicit so that River pays the same fsync per commit as sheetq.
// Zero cooldown and poll leave River's defaults.
type riverVariant struct {
	label          string
	workers        int // MaxWorkers of the default queue
	cooldown, poll time.Duration
}

func (v riverVariant) name() string     { return v.label }
func (v riverVariant) workerCount() int { return v.workers }

// noopArgs is the no-op job's arguments.
type noopArgs struct{}

// Kind names the job kind for River.
func (noopArgs) Kind() string { return "noop" }

// riverRig is one database and River client in a temp dir.
type riverRig struct {
	db        *sql.DB
	client    *river.Client[*sql.Tx]
	completed <-chan *river.Event
	cancelSub func()
	started   chan time.Time
	running   bool
}

func (v riverVariant) newRig(ctx context.Context, dir string, subscribe int, track bool) (*riverRig, error) {
	dsn := "file:" + filepath.Join(dir, "river.sqlite3") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	r := &riverRig{db: db, started: make(chan time.Time, 1)}
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
		if track {
			r.started <- time.Now()
		}
		return nil
	}))
	r.client, err = river.NewClient(driver, &river.Config{
		FetchCooldown:     v.cooldown,
		FetchPollInterval: v.poll,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: v.workers}},
		Workers:           workers,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	// River drops events when a subscriber's channel is full, so the channel holds every
	// completion of the run.
	r.completed, r.cancelSub = r.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: subscribe + 16,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	return r, nil
}

func (r *riverRig) start(ctx context.Context) error {
	if err := r.client.Start(ctx); err != nil {
		return err
	}
	r.running = true
	return nil
}

func (r *riverRig) close() {
	if r.running {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.client.Stop(ctx)
	}
	r.cancelSub()
	r.db.Close()
}

// waitCompleted waits for n completion events. River sends them after the completer has
// committed the batch that holds the job.
func (r *riverRig) waitCompleted(n int) error {
	deadline := time.After(waitTimeout)
	for i := 0; i < n; i++ {
		select {
		case ev, ok := <-r.completed:
			if !ok {
				return errors.New("subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				i--
			}
		case <-deadline:
			return fmt.Errorf("timed out waiting for %d completions (%d seen)", n, i)
		}
	}
	return nil
}

func (v riverVariant) prefilled(ctx context.Context, dir string, n int) (time.Duration, error) {
	r, err := v.newRig(ctx, dir, n, false)
	if err != nil {
		return 0, err
	}
	defer r.close()
	// Filled before the client starts, in batches, as River's riverbench does.
	const batch = 1000
	for i := 0; i < n; i += batch {
		params := make([]river.InsertManyParams, min(batch, n-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := r.client.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("fill: %w", err)
		}
	}
	t0 := time.Now()
	if err := r.start(ctx); err != nil {
		return 0, err
	}
	if err := r.waitCompleted(n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v riverVariant) oneByOne(ctx context.Context, dir string, n int) (time.Duration, error) {
	r, err := v.newRig(ctx, dir, n, false)
	if err != nil {
		return 0, err
	}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range n {
		if _, err := r.client.Insert(ctx, noopArgs{}, nil); err != nil {
			return 0, err
		}
	}
	if err := r.waitCompleted(n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v riverVariant) pickup(ctx context.Context, dir string, rounds int) ([]time.Duration, error) {
	r, err := v.newRig(ctx, dir, rounds, true)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, rounds)
	for range rounds {
		time.Sleep(idleGap())
		if _, err := r.client.Insert(ctx, noopArgs{}, nil); err != nil {
			return nil, err
		}
		t1 := time.Now()
		select {
		case t2 := <-r.started:
			out = append(out, t2.Sub(t1))
		case <-time.After(waitTimeout):
			return nil, errors.New("timed out waiting for the handler to start")
		}
		// The round ends when the job is committed as completed, so that the next
		// one starts on an idle client.
		if err := r.waitCompleted(1); err != nil {
			return nil, err
		}
	}
	return out, nil
}
