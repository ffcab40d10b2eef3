package export

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"sheetq/jobs"
)

// pipedAfter is piped with the pipe starting after n rows, so that a test sees both the
// rows written directly and the piped ones.
func pipedAfter(src Source, n int64) Source {
	return pipedSource{Source: src, spawn: func(f func()) { go f() }, after: n}
}

// funcSource streams by calling fn.
type funcSource func(ctx context.Context, w RowWriter) error

func (f funcSource) Stream(ctx context.Context, _ Query, w RowWriter) error { return f(ctx, w) }

// recordWriter keeps what it is given, and fails at row failAt (1-based; 0: never).
type recordWriter struct {
	cols   []Column
	total  int64
	begins int
	rows   [][]any
	failAt int
}

func (r *recordWriter) Begin(cols []Column, total int64) error {
	r.begins++
	r.cols, r.total = cols, total
	return nil
}

func (r *recordWriter) Row(values []any) error {
	if len(r.rows)+1 == r.failAt {
		return errors.New("disk full")
	}
	row := append([]any(nil), values...)
	for i, v := range row {
		if b, ok := v.([]byte); ok {
			row[i] = append([]byte(nil), b...) // a writer does not keep a source's values
		}
	}
	r.rows = append(r.rows, row)
	return nil
}

// The writer gets Begin, then every row in order, with the values the source sent at
// the time, although the source reuses its values slice and its []byte buffer; rows of
// long text are handed over in smaller batches and arrive the same.
func TestPipedDeliversRowsInOrder(t *testing.T) {
	const n = 3*pipeRows + 17
	long := string(make([]byte, 100<<10))
	src := funcSource(func(ctx context.Context, w RowWriter) error {
		if err := w.Begin([]Column{{Name: "i"}, {Name: "b"}, {Name: "s"}, {Name: "nil"}}, n); err != nil {
			return err
		}
		vals := make([]any, 4)
		buf := make([]byte, 8)
		for i := range n {
			copy(buf, fmt.Sprintf("%08d", i))
			s := strconv.Itoa(i)
			if i%100 == 0 {
				s = long
			}
			vals[0], vals[1], vals[2], vals[3] = int64(i), buf, s, nil
			if err := w.Row(vals); err != nil {
				return err
			}
			copy(buf, "XXXXXXXX") // the source may reuse it once Row returns
		}
		return nil
	})
	var w recordWriter
	if err := pipedAfter(src, 100).Stream(t.Context(), Query{}, &w); err != nil {
		t.Fatal(err)
	}
	if w.begins != 1 || len(w.cols) != 4 || w.total != n || len(w.rows) != n {
		t.Fatalf("begins %d, %d columns, total %d, %d rows; want 1, 4, %d, %d", w.begins, len(w.cols), w.total, len(w.rows), n, n)
	}
	for i, row := range w.rows {
		want := strconv.Itoa(i)
		if i%100 == 0 {
			want = long
		}
		if row[0] != int64(i) || string(row[1].([]byte)) != fmt.Sprintf("%08d", i) || row[2] != want || row[3] != nil {
			t.Fatalf("row %d: %v", i, row[:2])
		}
	}
}

// A writer that fails stops the source at its next row, and its error is the export's,
// whether it fails before the pipe starts (row 50) or on its own goroutine (row 1000);
// the source has returned by the time Stream does.
func TestPipedWriterErrorStopsTheSource(t *testing.T) {
	for _, failAt := range []int{50, 1000} {
		returned := make(chan error, 1)
		src := funcSource(func(ctx context.Context, w RowWriter) (err error) {
			defer func() { returned <- err }()
			if err := w.Begin([]Column{{Name: "i"}}, -1); err != nil {
				return err
			}
			for i := int64(0); ; i++ { // endless, but for the writer
				if err := w.Row([]any{i}); err != nil {
					return fmt.Errorf("source: %w", err)
				}
			}
		})
		w := recordWriter{failAt: failAt}
		err := pipedAfter(src, 100).Stream(t.Context(), Query{}, &w)
		if err == nil || err.Error() != "disk full" {
			t.Fatalf("failing at row %d: Stream: %v, want the writer's error", failAt, err)
		}
		if len(w.rows) != failAt-1 {
			t.Errorf("failing at row %d: the writer took %d rows", failAt, len(w.rows))
		}
		select {
		case serr := <-returned:
			if failAt > 100 && !errors.Is(serr, errWriterStopped) {
				t.Errorf("failing at row %d: the source's Row returned %v, want errWriterStopped", failAt, serr)
			}
		default:
			t.Fatalf("failing at row %d: Stream returned while the source was still running", failAt)
		}
	}
}

// A source's error comes back as it is, after the rows it sent before it, before and
// after the pipe starts.
func TestPipedSourceError(t *testing.T) {
	upstream := jobs.Retryable("upstream", errors.New("connection reset"))
	for _, n := range []int{10, 1000} {
		src := funcSource(func(ctx context.Context, w RowWriter) error {
			w.Begin([]Column{{Name: "i"}}, -1)
			for i := range n {
				w.Row([]any{int64(i)})
			}
			return upstream
		})
		var w recordWriter
		if err := pipedAfter(src, 100).Stream(t.Context(), Query{}, &w); err != upstream || len(w.rows) != n {
			t.Fatalf("Stream: %v with %d rows, want the source's error after its %d rows", err, len(w.rows), n)
		}
	}
}

// panicWriter panics at row at.
type panicWriter struct{ n, at int }

func (p *panicWriter) Begin([]Column, int64) error { return nil }
func (p *panicWriter) Row([]any) error {
	if p.n++; p.n == p.at {
		var cols []Column
		_ = cols[p.n] // out of range: a writer's bug
	}
	return nil
}

// A writer that panics on the pipe's goroutine, where the engine's recover does not
// reach, fails the export with a retryable "panic" instead of the process, and stops
// the source. A source that panics does so on the handler's goroutine, where the
// engine's recover does reach, after the writer's goroutine has ended.
func TestPipedPanics(t *testing.T) {
	endless := funcSource(func(ctx context.Context, w RowWriter) error {
		w.Begin([]Column{{Name: "i"}}, -1)
		for i := int64(0); ; i++ {
			if err := w.Row([]any{i}); err != nil {
				return err
			}
		}
	})
	err := pipedAfter(endless, 100).Stream(t.Context(), Query{}, &panicWriter{at: 1000})
	var je *jobs.Error
	if !errors.As(err, &je) || je.Code != "panic" || je.Permanent {
		t.Fatalf("a panicking writer: %v, want a retryable panic error", err)
	}

	boom := funcSource(func(ctx context.Context, w RowWriter) error {
		w.Begin([]Column{{Name: "i"}}, -1)
		for i := range 1000 {
			w.Row([]any{int64(i)})
		}
		panic("a source's bug")
	})
	var w recordWriter
	func() {
		defer func() {
			if p := recover(); p != "a source's bug" {
				t.Fatalf("recovered %v, want the source's panic", p)
			}
		}()
		pipedAfter(boom, 100).Stream(t.Context(), Query{}, &w)
	}()
	if len(w.rows) != 1000 {
		t.Fatalf("the writer had %d rows when the panic went on, want the 1000 sent before it", len(w.rows))
	}
}

// A cancel while the source waits on a full pipe ends it with "canceled", even when
// the source passes the pipe's bare error on.
func TestPipedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	src := funcSource(func(ctx context.Context, w RowWriter) error {
		if err := w.Begin([]Column{{Name: "i"}}, -1); err != nil {
			return err
		}
		for i := int64(0); ; i++ {
			if err := w.Row([]any{i}); err != nil {
				return err
			}
		}
	})
	w := cancelAt{at: 5000, cancel: cancel}
	err := pipedAfter(src, 100).Stream(ctx, Query{}, &w)
	var je *jobs.Error
	if !errors.As(err, &je) || je.Code != "canceled" {
		t.Fatalf("Stream after a cancel: %v, want a canceled error", err)
	}
}

type cancelAt struct {
	n, at  int
	cancel func()
}

func (c *cancelAt) Begin([]Column, int64) error { return nil }
func (c *cancelAt) Row([]any) error {
	if c.n++; c.n == c.at {
		c.cancel()
	}
	return nil
}
