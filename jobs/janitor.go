package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// Interval is how often the janitor sweeps (default Retention/24, or 1 h with
	// Retention 0; at least 1 min).
	Interval time.Duration
	// ExportsDir holds the published files.
	ExportsDir string
	// Files is where they are (OpenFiles); nil is ExportsDir (LocalFiles). A bucket
	// (S3Files) is also swept of objects no job references and of multipart uploads
	// cut short, every Interval even with Retention 0.
	Files Files
	// OrphanAge is how old an object no job references must be before it is removed
	// (default 1 h): a margin for the bucket's clock against this node's, and for sheetq
	// store copy, whose jobs appear only when its transaction commits.
	OrphanAge time.Duration
	// UploadAge is how old an unfinished multipart upload must be before it is aborted
	// (default 24 h): far above the longest upload and any clock skew.
	UploadAge time.Duration
	// Now is the clock objects' ages are measured with (default time.Now).
	Now func() time.Time
	// Logger receives one line per sweep that removed something.
	Logger *slog.Logger
	// OnChange, if set, is called after each job the janitor expires: a wake-up, like
	// Config.OnChange.
	OnChange func()
	// Leftovers are the kinds that keep files for a job's next attempt (an export's
	// checkpointed rows: ARCHITECTURE.md, "Checkpoints and resume"); each sweep removes
	// those of jobs that will run no more.
	Leftovers []LeftoverRemover
}

// A LeftoverRemover keeps files per job between attempts, and removes those of the
// jobs keep says no to.
type LeftoverRemover interface {
	RemoveResumeFiles(keep func(jobID string) bool) (int, error)
}

// Janitor applies retention: old files go (their jobs become EXPIRED), then old rows. In
// a bucket it also removes what no job references (sweepOrphans).
type Janitor struct {
	cfg    JanitorConfig
	st     Store
	jobs   jobGetter     // st, if it can look a job up; the orphan sweep needs it
	bucket orphanSweeper // cfg.Files, if its keys are per attempt
	stop   chan struct{}
	cancel context.CancelFunc // ends the sweeps' context; set by Start
	done   sync.WaitGroup
	once   sync.Once
}

// SweepResult says what one sweep removed.
type SweepResult struct {
	Expired    int   // jobs whose file was removed
	Deleted    int   // finished jobs removed with their events
	Orphans    int   // objects no job references, removed from a bucket
	Aborted    int   // unfinished multipart uploads aborted
	Leftovers  int   // folders of files kept for a next attempt that no job will make
	BytesFreed int64 // size of the removed files
}

// jobGetter looks a job up (both stores' Get).
type jobGetter interface {
	Get(ctx context.Context, id string) (store.Job, error)
}

// orphanSweeper is a file store whose keys are each attempt's own (S3Files). There, an
// object that no job references now never will (sweepOrphans), so it can be removed. In
// the local directory (LocalFiles) a job's attempts share one name: a file found without
// its job may be the next attempt's, renamed in while the sweep looked, so it is left to
// sheetq doctor, which lists it.
type orphanSweeper interface {
	List(ctx context.Context) ([]FileInfo, error)
	AbortStaleUploads(ctx context.Context, olderThan time.Duration) (int, error)
}

// sweepBatch bounds one statement's work list; a sweep loops until nothing is left.
const sweepBatch = 500

// NewJanitor returns a janitor over st.
func NewJanitor(st Store, cfg JanitorConfig) *Janitor {
	if cfg.Interval <= 0 {
		cfg.Interval = max(cmp.Or(cfg.Retention/24, time.Hour), time.Minute)
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Files = filesOr(cfg.Files, cfg.ExportsDir)
	cfg.OrphanAge = cmp.Or(cfg.OrphanAge, time.Hour)
	cfg.UploadAge = cmp.Or(cfg.UploadAge, 24*time.Hour)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	jan := &Janitor{cfg: cfg, st: st, stop: make(chan struct{})}
	jan.jobs, _ = st.(jobGetter)
	jan.bucket, _ = cfg.Files.(orphanSweeper)
	return jan
}

// Start sweeps once and then every Interval, until Stop. With Retention 0 and the local
// directory it does nothing. As for every background service (ARCHITECTURE.md,
// "Services"), ctx's cancellation does not end the sweeping: Stop does, and cancels a
// sweep under way.
func (j *Janitor) Start(ctx context.Context) error {
	if j.cfg.Retention <= 0 && j.bucket == nil && len(j.cfg.Leftovers) == 0 {
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

// Sweep removes what retention says is due now, by the store's clock, then, in a bucket,
// what no job references, and reports it.
func (j *Janitor) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	if j.cfg.Retention > 0 {
		if err := j.retain(ctx, &res); err != nil {
			return res, err
		}
	}
	if j.bucket != nil {
		if err := j.sweepOrphans(ctx, &res); err != nil {
			return res, err
		}
	}
	if j.jobs != nil {
		for _, l := range j.cfg.Leftovers {
			n, err := l.RemoveResumeFiles(func(id string) bool {
				job, err := j.jobs.Get(ctx, id)
				switch {
				case errors.Is(err, store.ErrNotFound):
					return false
				case err != nil:
					return true // not known now: kept until a sweep knows
				}
				return job.Status == store.StatusPending || job.Status == store.StatusProcessing
			})
			res.Leftovers += n
			if err != nil {
				return res, err
			}
		}
	}
	if res.Expired+res.Deleted+res.Orphans+res.Aborted+res.Leftovers > 0 {
		j.cfg.Logger.InfoContext(ctx, "retention sweep", "expired", res.Expired, "deleted", res.Deleted,
			"orphans", res.Orphans, "aborted_uploads", res.Aborted, "leftovers", res.Leftovers, "bytes_freed", res.BytesFreed, "retention", j.cfg.Retention)
	}
	return res, nil
}

// retain applies retention: files of old jobs, then old rows.
func (j *Janitor) retain(ctx context.Context, res *SweepResult) error {
	// Files first: remove the file, then mark the job EXPIRED. A crash in between
	// leaves a SUCCEEDED job without a file, which the next sweep expires.
	for {
		due, err := j.st.FinishedOlderThan(ctx, []store.Status{store.StatusSucceeded}, j.cfg.Retention, sweepBatch)
		if err != nil {
			return err
		}
		for _, job := range due {
			n, err := j.removeFile(ctx, job.FileName)
			if err != nil {
				return err
			}
			_, err = j.st.Expire(ctx, job.ID)
			if errors.Is(err, store.ErrNotSucceeded) {
				continue // deleted or changed meanwhile
			}
			if err != nil {
				return err
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
			return err
		}
		for _, job := range due {
			if _, err := j.st.Delete(ctx, job.ID); err != nil {
				if errors.Is(err, store.ErrNotFinished) || errors.Is(err, store.ErrNotFound) {
					continue
				}
				return err
			}
			n, err := j.removeFile(ctx, job.FileName)
			if err != nil {
				return err
			}
			res.Deleted++
			res.BytesFreed += n
		}
		if len(due) < sweepBatch {
			break
		}
	}
	return nil
}

// sweepOrphans removes the bucket's objects that no job references and aborts uploads cut
// short. An object of attempt a of job J is kept while J is PROCESSING in attempt a (its
// commit may be under way, or a reaper may complete J from it) or J is SUCCEEDED with
// it as its file. Otherwise nothing can make it J's file any more: both ways in, the
// SUCCEEDED commit and CompleteFromFile, are fenced on attempt a while PROCESSING, and a
// job never returns to an attempt it left. So a lost lease's upload, a failed commit's,
// and the file of a job deleted or expired in between go.
func (j *Janitor) sweepOrphans(ctx context.Context, res *SweepResult) error {
	if j.jobs == nil {
		return errors.New("orphan sweep: the job store cannot look jobs up")
	}
	objs, err := j.bucket.List(ctx)
	if err != nil {
		return fmt.Errorf("orphan sweep: %w", err)
	}
	now := j.cfg.Now()
	for _, o := range objs {
		if o.JobID == "" || now.Sub(o.Modified) < j.cfg.OrphanAge {
			continue // not a key of ours, or too fresh to judge
		}
		job, err := j.jobs.Get(ctx, o.JobID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("orphan sweep: %w", err)
		case job.Status == store.StatusProcessing && job.Attempt == o.Attempt:
			continue
		case job.Status == store.StatusSucceeded && job.FileName == o.Key:
			continue
		}
		n, err := j.cfg.Files.Delete(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("orphan sweep: %w", err)
		}
		res.Orphans++
		res.BytesFreed += n
	}
	n, err := j.bucket.AbortStaleUploads(ctx, j.cfg.UploadAge)
	res.Aborted += n
	if err != nil {
		return fmt.Errorf("orphan sweep: %w", err)
	}
	return nil
}

// removeFile deletes a job's file and returns its size; a file that is already gone, or
// no name (a job that published no file), is fine.
func (j *Janitor) removeFile(ctx context.Context, name string) (int64, error) {
	if name == "" {
		return 0, nil
	}
	n, err := j.cfg.Files.Delete(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	return n, nil
}
