package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"sheetq/jobs"
)

// piped runs src on a goroutine of its own, handing its rows to the writer in batches,
// so that reading rows (the driver, decoding, column conversions) and writing them (cell
// XML, compression) use two cores instead of taking turns on one. The writer's methods
// still run on the caller's goroutine, in order. With one core it only adds a copy.
func piped(src Source) Source { return pipedSource{src} }

type pipedSource struct{ Source }

// Batches are handed over when they hold pipeRows rows or pipeBytes bytes of text and
// binary values, whichever comes first; pipeDepth batches may wait. At most
// (pipeDepth+2) batches exist at a time, so the rows in flight stay a few MiB even when
// cells are long.
const (
	pipeRows  = 256
	pipeBytes = 256 << 10
	pipeDepth = 4
)

// batch is a run of rows, or the Begin that comes before them.
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
	pw := &pipeWriter{ctx: ctx, out: make(chan *batch, pipeDepth), free: make(chan *batch, pipeDepth+2)}
	srcErr := make(chan error, 1)
	go func() {
		err := pw.run(p.Source, q)
		close(pw.out)
		srcErr <- err
	}()
	var werr error
	for b := range pw.out {
		if werr == nil {
			werr = deliver(w, b)
			if werr != nil {
				cancel(errWriterStopped) // the source stops at its next row
			}
		}
		select {
		case pw.free <- b:
		default:
		}
	}
	err := <-srcErr
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

// pipeWriter is the RowWriter the source writes to, on the source's goroutine.
type pipeWriter struct {
	ctx  context.Context
	out  chan *batch
	free chan *batch
	cur  *batch
	cols int
}

// run streams src into the pipe and sends what is left, even after an error; a panic in the source becomes
// the export's error, as the engine makes of one in a job (it is on another goroutine,
// where the engine's recover does not reach).
func (pw *pipeWriter) run(src Source, q Query) (err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.Default().Error("export source panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = jobs.Retryable("panic", fmt.Errorf("source panicked: %v", p))
		}
	}()
	err = src.Stream(pw.ctx, q, pw)
	if serr := pw.send(); err == nil { // the rows before an error arrive too, as without the pipe
		err = serr
	}
	return err
}

// Begin implements RowWriter.
func (pw *pipeWriter) Begin(cols []Column, total int64) error {
	if err := pw.send(); err != nil {
		return err
	}
	pw.cols = len(cols)
	return pw.put(&batch{begin: true, cols: cols, total: total})
}

// Row implements RowWriter: a copy of values joins the batch. The source may reuse
// values and a []byte in them once Row returns, so those are copied; strings and the
// other values are immutable.
func (pw *pipeWriter) Row(values []any) error {
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
