package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"sheetq/store"
)

// Handler runs one attempt of a job kind. It returns nil on success, or an error made
// with Permanent or Retryable (an unmarked error counts as retryable). It must return
// soon after ctx is done.
type Handler interface {
	Run(ctx context.Context, run *Run) error
}

// An Ender is a Handler that keeps something of a job's between its attempts (an
// export's checkpointed rows: ARCHITECTURE.md, "Checkpoints and resume") and lets it go
// when the job ends (SUCCEEDED, FAILED or CANCELED): by an attempt of this engine, or,
// with orphan, by its reaper, for an attempt that ran elsewhere (completed from its
// file, or out of attempts). What a crash leaves otherwise is the janitor's
// (JanitorConfig.Leftovers).
type Ender interface {
	Ended(job store.Job, orphan bool)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run *Run) error

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, run *Run) error { return f(ctx, run) }

// Run is what one attempt of a job sees: its identity, its arguments, a place to write
// its file and a way to report progress.
type Run struct {
	// JobID is the job's opaque id.
	JobID string
	// Kind is the registered job kind.
	Kind string
	// Args is the job's JSON arguments as accepted.
	Args json.RawMessage
	// Attempt counts from 1; MaxAttempts is the job's budget.
	Attempt, MaxAttempts int

	partPath   string
	onProgress func(id string, rows, total int64)
	gate       *Gate // the engine's (Config.Gate); nil: Yield only lets others run
	nice       int   // the handler's thread priority (Config.Nice) where it is lowered; 0: not

	rows, total atomic.Int64 // total < 0: unknown
	progressed  atomic.Int64 // bumped on every Progress call that moves rows; read by the stall guard
	// fenced is set when the engine abandons the attempt's handler: from then on its
	// output, progress and warnings are refused (fence).
	fenced atomic.Bool

	mu       sync.Mutex
	out      *os.File
	hash     *hashingWriter
	warnings []string

	// Resume is the checkpoint an earlier attempt of the job saved (Checkpoint), for this
	// one to continue from; nil: none, start from the beginning.
	Resume []byte

	ckMu      sync.Mutex
	ckData    []byte // the latest checkpoint not yet written, if ckPending
	ckPending bool
	ckWant    chan struct{} // capacity 1: the engine wants a checkpoint (CheckpointWanted)
	// checkpoints is set by the handler's first Checkpoint: it keeps them, so the
	// heartbeat waits a moment for the next one before it stamps (heartbeat).
	checkpoints atomic.Bool
	beat        func() // asks the heartbeat to write now; nil outside an engine
	resumed     func(rows int64)
}

func newRun(tmpDir, id, kind string, args json.RawMessage, attempt, maxAttempts int) *Run {
	r := &Run{
		JobID: id, Kind: kind, Args: args, Attempt: attempt, MaxAttempts: maxAttempts,
		partPath: filepath.Join(tmpDir, PartName(id, attempt)),
	}
	r.total.Store(-1)
	r.ckWant = make(chan struct{}, 1)
	return r
}

// CheckpointWanted fires when the engine wants a checkpoint: at each heartbeat, so that
// a crash costs at most about one heartbeat interval of work (ARCHITECTURE.md,
// "Checkpoints and resume"). A handler that can resume answers with Checkpoint once its
// output is durable up to a point it can continue from; one that cannot ignores it.
func (r *Run) CheckpointWanted() <-chan struct{} { return r.ckWant }

// WantsCheckpoint reports, without taking it, whether a checkpoint is wanted: cheap
// enough to ask after every row.
func (r *Run) WantsCheckpoint() bool { return len(r.ckWant) > 0 }

// Checkpoint records how far the attempt got, as the job kind's own JSON, and has the
// heartbeat write it at once, fenced. The attempt that takes over after a crash finds it
// in Resume. Empty data drops the job's checkpoint (a resume that found its files gone
// starts again from nothing). An abandoned handler's checkpoints are refused.
func (r *Run) Checkpoint(data []byte) {
	select {
	case <-r.ckWant:
	default:
	}
	if r.fenced.Load() {
		return
	}
	r.checkpoints.Store(true)
	r.ckMu.Lock()
	r.ckData, r.ckPending = append(make([]byte, 0, len(data)), data...), true
	r.ckMu.Unlock()
	if r.beat != nil {
		r.beat()
	}
}

// Resumed tells the engine that the attempt continues from an earlier one's checkpoint,
// with rows already in its file: the job's timeline says so and the metrics count it.
func (r *Run) Resumed(rows int64) {
	if r.resumed != nil && !r.fenced.Load() {
		r.resumed(rows)
	}
}

// wantCheckpoint asks the handler for a checkpoint (CheckpointWanted).
func (r *Run) wantCheckpoint() {
	select {
	case r.ckWant <- struct{}{}:
	default:
	}
}

// takeCheckpoint returns the checkpoint to write, if one is waiting.
func (r *Run) takeCheckpoint() ([]byte, bool) {
	r.ckMu.Lock()
	defer r.ckMu.Unlock()
	data, ok := r.ckData, r.ckPending
	r.ckData, r.ckPending = nil, false
	return data, ok
}

// untakeCheckpoint puts back a checkpoint whose write failed, unless a newer one came.
func (r *Run) untakeCheckpoint(data []byte) {
	r.ckMu.Lock()
	defer r.ckMu.Unlock()
	if !r.ckPending {
		r.ckData, r.ckPending = data, true
	}
}

// Output returns the writer for the attempt's result file. The engine creates
// tmp/<id>.<attempt>.part on the first call and, when the handler returns nil, fsyncs
// it and publishes it as the job's file. A handler that never calls Output publishes
// no file.
func (r *Run) Output() (io.Writer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced.Load() {
		return nil, errFenced
	}
	if r.out != nil {
		return runWriter{r}, nil
	}
	f, err := os.OpenFile(r.partPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, Retryable("io", fmt.Errorf("create part file: %w", err))
	}
	r.out = f
	r.hash = newHashingWriter(f)
	return runWriter{r}, nil
}

// errFenced is what an abandoned handler's writes get.
var errFenced = errors.New("attempt abandoned by the engine: its output is refused")

// runWriter is the writer Output returns: the part file, until the attempt is fenced.
type runWriter struct{ r *Run }

func (w runWriter) Write(p []byte) (int, error) {
	if w.r.fenced.Load() {
		return 0, errFenced
	}
	return w.r.hash.Write(p)
}

// Progress records rows written so far and the total when known (total < 0: unknown).
// It is cheap: the heartbeat carries the latest figures to the store.
func (r *Run) Progress(rows, total int64) {
	if r.fenced.Load() {
		return // an abandoned handler: its job has moved on
	}
	if old := r.rows.Swap(rows); old != rows {
		r.progressed.Add(1)
		if rows > 0 {
			faultPoint("while-writing")
		}
	}
	r.total.Store(total)
	if r.onProgress != nil {
		r.onProgress(r.JobID, rows, total)
	}
}

// Yield lets request handlers go first: job code calls it between units of work (the
// xlsx writer does every few dozen rows). It waits while the engine's gate has a
// request being accepted, for at most 10 ms, or through a burst of requests
// (Gate.Yield); otherwise it only lets other goroutines run.
func (r *Run) Yield() {
	if r.gate == nil {
		runtime.Gosched()
		return
	}
	r.gate.Yield()
}

// Go runs f on a goroutine of its own at the handler's priority: where the engine runs
// handlers on threads of lowered priority (Config.Nice), f's thread is lowered too, so
// that the work a handler spreads over several cores still lets requests go first. The
// handler must wait for f to return before it does.
func (r *Run) Go(f func()) {
	go func() {
		if r.nice != 0 {
			lowerPriority(r.nice) // as the handler's own thread; if it fails, f runs at normal priority
		}
		f()
	}()
}

// progress returns the latest figures for a heartbeat.
func (r *Run) progress() (rows, total int64) { return r.rows.Load(), r.total.Load() }

// closePart fsyncs and closes the part file, if the handler opened one.
func (r *Run) closePart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return nil
	}
	f := r.out
	r.out = nil
	// The file must be on disk before the rename publishes it (rule 7).
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync part file: %w", err)
	}
	return nil
}

// fence refuses the attempt's output from now on, closes its part file and removes
// it. The engine calls it when it abandons a handler that did not stop: that handler's
// goroutine may go on writing, and none of it may reach the job's file (rules 7, 13). A
// write already past the check fails on the closed file or lands in the removed one.
func (r *Run) fence() {
	r.mu.Lock()
	r.fenced.Store(true)
	f := r.out
	r.out = nil
	r.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
	r.removePart()
}

// removePart deletes the attempt's part file; a missing file is fine.
func (r *Run) removePart() {
	_ = os.Remove(r.partPath)
}

// maxWarnings bounds what one attempt records; a source with a million over-long cells
// must not turn its job row into a log.
const maxWarnings = 20

// Warn records something the user should know about a successful result, such as text
// cut at a cell limit. Warnings are kept with the job when it succeeds.
func (r *Run) Warn(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.fenced.Load():
	case len(r.warnings) < maxWarnings:
		r.warnings = append(r.warnings, msg)
	case len(r.warnings) == maxWarnings:
		r.warnings = append(r.warnings, "more warnings were left out")
	}
}

// Warnings returns the warnings recorded so far.
func (r *Run) Warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warnings...)
}
