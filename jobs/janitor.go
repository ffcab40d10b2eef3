package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"sheetq/store"
)

// JanitorConfig tunes retention.
type JanitorConfig struct {
	// Retention is how long a finished job keeps its file; after that the file is removed
	// and the job becomes EXPIRED. Finished job rows (with their events and idempotency
	// keys) are removed after twice this. Zero turns retention off.
	Retention time.Duration
	// Interval is how often the janitor sweeps (default Retention/24, at least 1 min).
	Interval time.Duration
	// ExportsDir holds the published files.
	ExportsDir string
	// Logger receives one line per sweep that removed something.
	Logger *slog.Logger
	// OnChange, if set, is called after each job the janitor expires: a wake-up, like
	// Config.OnChange.
	OnChange func()
}

// Janitor applies retention: old files go (their jobs become EXPIRED), then old rows.
type Janitor struct {
	cfg    JanitorConfig
	st     Store
	stop   chan struct{}
	cancel context.CancelFunc // ends the sweeps' context; set by Start
	done   sync.WaitGroup
	once   sync.Once
}

// SweepResult says what one sweep removed.
type SweepResult struct {
	Expired    int   // jobs whose file was removed
	Deleted    int   // finished jobs removed with their events
	BytesFreed int64 // size of the removed files
}

// sweepBatch bounds one statement's work list; a sweep loops until nothing is left.
const sweepBatch = 500

// NewJanitor returns a janitor over st.
func NewJanitor(st Store, cfg JanitorConfig) *Janitor {
	if cfg.Interval <= 0 {
		cfg.Interval = max(cfg.Retention/24, time.Minute)
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Janitor{cfg: cfg, st: st, stop: make(chan struct{})}
}

// Start sweeps once and then every Interval, until Stop. With Retention 0 it does nothing.
// As for every background service (ARCHITECTURE.md, "Services"), ctx's cancellation
// does not end the sweeping: Stop does, and cancels a sweep under way.
func (j *Janitor) Start(ctx context.Context) error {
	if j.cfg.Retention <= 0 {
		return nil
	}
	ctx, j.cancel = context.WithCancel(context.WithoutCancel(ctx))
	j.done.Add(1)
	go func() {
		defer j.done.Done()
		t := time.NewTicker(j.cfg.Interval)
		defer t.Stop()
		for {
			if _, err := j.Sweep(ctx); err != nil && ctx.Err() == nil {
				j.cfg.Logger.ErrorContext(ctx, "retention sweep", "err", err)
			}
			select {
			case <-j.stop:
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop ends the sweeping goroutine and waits for it.
func (j *Janitor) Stop() {
	j.once.Do(func() {
		close(j.stop)
		if j.cancel != nil {
			j.cancel() // a sweep under way stops at its next statement
		}
	})
	j.done.Wait()
}

// Sweep removes what retention says is due now, by the store's clock, and reports it.
func (j *Janitor) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	// Files first: remove the file, then mark the job EXPIRED. A crash in between
	// leaves a SUCCEEDED job without a file, which the next sweep expires.
	for {
		due, err := j.st.FinishedOlderThan(ctx, []store.Status{store.StatusSucceeded}, j.cfg.Retention, sweepBatch)
		if err != nil {
			return res, err
		}
		for _, job := range due {
			n, err := removeFile(FilePath(j.cfg.ExportsDir, job.FileName))
			if err != nil {
				return res, err
			}
			_, err = j.st.Expire(ctx, job.ID)
			if errors.Is(err, store.ErrNotSucceeded) {
				continue // deleted or changed meanwhile
			}
			if err != nil {
				return res, err
			}
			res.Expired++
			res.BytesFreed += n
			if j.cfg.OnChange != nil {
				j.cfg.OnChange()
			}
		}
		if len(due) < sweepBatch {
			break
		}
	}
	// Then rows: every finished job (exports and webhook deliveries alike) older than
	// twice the retention, with its events. Its idempotency key is free again.
	final := []store.Status{store.StatusSucceeded, store.StatusFailed, store.StatusCanceled, store.StatusExpired}
	for {
		due, err := j.st.FinishedOlderThan(ctx, final, 2*j.cfg.Retention, sweepBatch)
		if err != nil {
			return res, err
		}
		for _, job := range due {
			if _, err := j.st.Delete(ctx, job.ID); err != nil {
				if errors.Is(err, store.ErrNotFinished) || errors.Is(err, store.ErrNotFound) {
					continue
				}
				return res, err
			}
			n, err := removeFile(FilePath(j.cfg.ExportsDir, job.FileName))
			if err != nil {
				return res, err
			}
			res.Deleted++
			res.BytesFreed += n
		}
		if len(due) < sweepBatch {
			break
		}
	}
	if res.Expired+res.Deleted > 0 {
		j.cfg.Logger.InfoContext(ctx, "retention sweep", "expired", res.Expired, "deleted", res.Deleted,
			"bytes_freed", res.BytesFreed, "retention", j.cfg.Retention)
	}
	return res, nil
}

// removeFile deletes path and returns its size; a file that is already gone, or no
// path (a job that published no file), is fine.
func removeFile(path string) (int64, error) {
	if path == "" {
		return 0, nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("retention: %w", err)
	}
	return fi.Size(), nil
}
