package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// sheetqVariant is the real engine through its public API: sqlite.Open with the zero
// Options (the server's production setting: WAL, synchronous=FULL, one writer) and
// jobs.New with the server's defaults, the given number of workers and a no-op handler.
type sheetqVariant struct{ workers int }

func (sheetqVariant) name() string       { return "sheetq" }
func (v sheetqVariant) workerCount() int { return v.workers }

const noopKind = "noop"

// sheetqRig is one store and engine in a temp dir, with what the benchmark needs to see
// from outside: handler starts and committed successes.
type sheetqRig struct {
	st      *store.Store
	e       *jobs.Engine
	started chan time.Time // each handler start, when track is set
	track   bool
	handled atomic.Int64  // handlers returned
	changed chan struct{} // the engine committed something (OnChange), coalesced
}

func newSheetqRig(ctx context.Context, dir string, workers int, track bool) (*sheetqRig, error) {
	st, err := sqlite.Open(ctx, filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		return nil, err
	}
	r := &sheetqRig{st: st, track: track, started: make(chan time.Time, 1), changed: make(chan struct{}, 1)}
	cfg := jobs.Defaults()
	cfg.Workers = workers
	cfg.TmpDir, cfg.ExportsDir = filepath.Join(dir, "tmp"), filepath.Join(dir, "exports")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// OnChange carries no job: it only says "look again", which is all waitSucceeded needs.
	cfg.OnChange = func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	r.e = jobs.New(st, cfg)
	r.e.Register(noopKind, jobs.HandlerFunc(func(context.Context, *jobs.Run) error {
		if r.track {
			r.started <- time.Now()
		}
		r.handled.Add(1)
		return nil
	}))
	return r, nil
}

func (r *sheetqRig) close() {
	r.e.Stop()
	r.st.Close()
}

// waitSucceeded waits until n jobs are SUCCEEDED in the store. It reads the table only
// once n handlers have returned, on each change after that, so that the reads do not
// slow the run they measure.
func (r *sheetqRig) waitSucceeded(ctx context.Context, n int) error {
	deadline := time.After(waitTimeout)
	for {
		if r.handled.Load() >= int64(n) {
			c, err := r.st.Counts(ctx)
			if err != nil {
				return err
			}
			if c[store.StatusSucceeded] >= n {
				return nil
			}
		}
		select {
		case <-r.changed:
		case <-deadline:
			return fmt.Errorf("timed out waiting for %d jobs to succeed (%d handled)", n, r.handled.Load())
		}
	}
}

func newJob() store.NewJob {
	return store.NewJob{ID: jobs.NewID(), Kind: noopKind, Args: json.RawMessage(`{}`)}
}

func (v sheetqVariant) prefilled(ctx context.Context, dir string, n int) (time.Duration, error) {
	r, err := newSheetqRig(ctx, dir, v.workers, false)
	if err != nil {
		return 0, err
	}
	defer r.close()
	// Filled through the store, with the engine not started; concurrent callers share
	// group commits, which only makes the untimed part shorter.
	const fillers = 16
	var wg sync.WaitGroup
	errs := make(chan error, fillers)
	for w := range fillers {
		wg.Go(func() {
			for i := w; i < n; i += fillers {
				if _, _, err := r.st.Enqueue(ctx, newJob()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collectErrs(errs)...); err != nil {
		return 0, fmt.Errorf("fill: %w", err)
	}
	t0 := time.Now()
	if err := r.e.Start(ctx); err != nil {
		return 0, err
	}
	if err := r.waitSucceeded(ctx, n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v sheetqVariant) oneByOne(ctx context.Context, dir string, n int) (time.Duration, error) {
	r, err := newSheetqRig(ctx, dir, v.workers, false)
	if err != nil {
		return 0, err
	}
	defer r.close()
	if err := r.e.Start(ctx); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range n {
		if _, _, err := r.e.Enqueue(ctx, newJob()); err != nil {
			return 0, err
		}
	}
	if err := r.waitSucceeded(ctx, n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v sheetqVariant) pickup(ctx context.Context, dir string, rounds int) ([]time.Duration, error) {
	r, err := newSheetqRig(ctx, dir, v.workers, true)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.e.Start(ctx); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, rounds)
	for i := range rounds {
		time.Sleep(idleGap())
		if _, _, err := r.e.Enqueue(ctx, newJob()); err != nil {
			return nil, err
		}
		t1 := time.Now()
		select {
		case t2 := <-r.started:
			out = append(out, t2.Sub(t1))
		case <-time.After(waitTimeout):
			return nil, errors.New("timed out waiting for the handler to start")
		}
		if err := r.waitSucceeded(ctx, i+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func collectErrs(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}
