package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"sheetq/jobs"
)

// piped lets a long export read and write on two cores: after the first pipeAfter rows,
// which go straight to the writer as without it, the writer moves to a goroutine of its
// own (started with spawn: jobs.Run.Go, which keeps it at the job's priority) and the
// source hands it rows in batches, so that reading rows (the driver, decoding, column
// conversions) and writing them (cell XML, compression) no longer take turns on one
// core. A small export never starts the goroutine. The writer's methods still run one at
// a time, in order, and all of them have returned when Stream does. nil spawn: the go
// statement. When want fires while the writer's goroutine waits for rows, it asks a
// writer that keeps checkpoints for one (idleCheckpointer): a slow source's rows are
// checkpointed without waiting for its next row. nil want: never.
func piped(src Source, spawn func(func()), want <-chan struct{}) Source {
	if spawn == nil {
		spawn = func(f func()) { go f() }
	}
	return pipedSource{Source: src, spawn: spawn, after: pipeAfter, want: want}
}

type pipedSource struct {
	Source
	spawn func(func())
	after int64 // rows written directly before the pipe starts
	want  <-chan struct{}
}

// An idleCheckpointer is a RowWriter that can make a checkpoint between rows.
type idleCheckpointer interface {
	idleCheckpoint() error
}

// pipeAfter is how many rows an export writes before it pipes: a few tens of
// milliseconds of work, below which a second goroutine (and, at a lowered priority, a
// thread of its own) costs more than it brings.
const pipeAfter = 8192

// Batches are handed over when they hold pipeRows rows or pipeBytes bytes of text and
// binary values, whichever comes first; pipeDepth batches may wait. At most
// (pipeDepth+2) batches exist at a time, so the rows in flight stay a few MiB even when
// cells are long.
const (
	pipeRows  = 256
	pipeBytes = 256 << 10
	pipeDepth = 4
)

// batch is a run of rows, or a Begin.
type batch struct {
	begin bool
	cols  []Column
	total int64
	rows  [][]any
	bytes int
}

// errWriterStopped is what the source's writes return once the writer has failed:
// the writer's error is the one the export reports.
var errWriterStopped = errors.New("the file writer stopped")

// Stream implements Source.
func (p pipedSource) Stream(parent context.Context, q Query, w RowWriter) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	pw := &pipeWriter{ctx: ctx, cancel: cancel, w: w, spawn: p.spawn, after: p.after, want: p.want}
	defer pw.stop() // also when the source panics: the writer's goroutine ends first
	err := p.Source.Stream(ctx, q, pw)
	if serr := pw.send(); err == nil { // the rows before an error arrive too, as without the pipe
		err = serr
	}
	werr := pw.stop()
	var je *jobs.Error
	switch {
	case werr != nil:
		return werr
	case err != nil && parent.Err() != nil && !errors.As(err, &je):
		// The source passed on the pipe's own cancel error.
		return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", q.Report.Source, context.Cause(parent)))
	}
	return err
}

// pipeWriter is the RowWriter the source writes to, on the source's goroutine.
type pipeWriter struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	w      RowWriter
	spawn  func(func())
	after  int64
	want   <-chan struct{}

	rows int64
	cols int
	werr error // the writer's error, once it failed (directly or on its goroutine)

	// Set once the pipe has started.
	out  chan *batch
	free chan *batch
	done chan error // the writer goroutine's error, once out is closed and drained
	cur  *batch
}

// Begin implements RowWriter.
func (pw *pipeWriter) Begin(cols []Column, total int64) error {
	pw.cols = len(cols)
	if pw.out == nil {
		return pw.direct(pw.w.Begin(cols, total))
	}
	if err := pw.send(); err != nil {
		return err
	}
	return pw.put(&batch{begin: true, cols: cols, total: total})
}

// direct notes err, from a writer's method called on the source's goroutine.
func (pw *pipeWriter) direct(err error) error {
	if err != nil {
		pw.werr = err
	}
	return err
}

// Row implements RowWriter: before the pipe starts, the writer's Row; after, a copy of
// values joins the batch. The source may reuse values and a []byte in them once Row
// returns, so those are copied; strings and the other values are immutable.
func (pw *pipeWriter) Row(values []any) error {
	pw.rows++
	if pw.out == nil {
		if pw.rows <= pw.after {
			return pw.direct(pw.w.Row(values))
		}
		pw.start()
	}
	b := pw.cur
	if b == nil {
		b = pw.take()
		pw.cur = b
	}
	var row []any
	if n := len(b.rows); n < cap(b.rows) && cap(b.rows[:n+1][n]) >= len(values) {
		row = b.rows[:n+1][n][:len(values)] // a row slice from the batch's last use
	} else {
		row = make([]any, len(values), max(len(values), pw.cols))
	}
	for i, v := range values {
		switch v := v.(type) {
		case []byte:
			if v != nil {
				v = append([]byte(nil), v...)
			}
			row[i] = v
			b.bytes += len(v)
		case string:
			row[i] = v
			b.bytes += len(v)
		default:
			row[i] = v
		}
	}
	b.rows = append(b.rows, row)
	if len(b.rows) >= pipeRows || b.bytes >= pipeBytes {
		return pw.send()
	}
	return nil
}

// start moves the writer to a goroutine of its own. A panic there becomes the export's
// error, as the engine makes of one in a job: the engine's recover does not reach it.
func (pw *pipeWriter) start() {
	pw.out = make(chan *batch, pipeDepth)
	pw.free = make(chan *batch, pipeDepth+2)
	pw.done = make(chan error, 1)
	pw.spawn(func() {
		var werr error
		defer func() {
			if p := recover(); p != nil {
				slog.Default().Error("export writer panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				werr = jobs.Retryable("panic", fmt.Errorf("file writer panicked: %v", p))
				pw.cancel(errWriterStopped)
				for range pw.out { // let the source finish its sends
				}
			}
			pw.done <- werr
		}()
		ic, _ := pw.w.(idleCheckpointer)
		want := pw.want
		if ic == nil {
			want = nil
		}
		for {
			var b *batch
			select {
			case b = <-pw.out:
			case <-want:
				if werr == nil {
					if werr = ic.idleCheckpoint(); werr != nil {
						pw.cancel(errWriterStopped)
					}
				}
				continue
			}
			if b == nil {
				break // out is closed
			}
			if werr == nil {
				if werr = deliver(pw.w, b); werr != nil {
					pw.cancel(errWriterStopped) // the source stops at its next row
				}
			}
			select {
			case pw.free <- b:
			default:
			}
		}
	})
}

func deliver(w RowWriter, b *batch) error {
	if b.begin {
		return w.Begin(b.cols, b.total)
	}
	for _, row := range b.rows {
		if err := w.Row(row); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the pipe, if it started: out is closed, and once the writer's goroutine has
// written what it was given and returned, its error is the writer's. It may be called
// more than once.
func (pw *pipeWriter) stop() error {
	if pw.out != nil {
		pw.send() // after a panic in the source, the rows it sent before it; else a no-op
		close(pw.out)
		pw.werr = <-pw.done
		pw.out, pw.cur = nil, nil
	}
	return pw.werr
}

// take is an empty batch: a used one if the writer has handed one back.
func (pw *pipeWriter) take() *batch {
	select {
	case b := <-pw.free:
		for _, row := range b.rows {
			clear(row) // drop the values for the collector
		}
		b.begin, b.cols, b.rows, b.bytes = false, nil, b.rows[:0], 0
		return b
	default:
		return &batch{rows: make([][]any, 0, pipeRows)}
	}
}

// send hands the current batch, if any, to the writer.
func (pw *pipeWriter) send() error {
	if pw.cur == nil || len(pw.cur.rows) == 0 {
		return nil
	}
	b := pw.cur
	pw.cur = nil
	return pw.put(b)
}

func (pw *pipeWriter) put(b *batch) error {
	select {
	case pw.out <- b:
		return nil
	case <-pw.ctx.Done():
		return context.Cause(pw.ctx)
	}
}
