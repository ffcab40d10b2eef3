package export

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"sheetq/jobs"
)

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
	r.rows = append(r.rows, append([]any(nil), values...))
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
	if err := piped(src).Stream(t.Context(), Query{}, &w); err != nil {
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

// A writer that fails stops the source at its next row, and its error is the export's;
// the source has returned by the time Stream does.
func TestPipedWriterErrorStopsTheSource(t *testing.T) {
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
	w := recordWriter{failAt: 1000}
	err := piped(src).Stream(t.Context(), Query{}, &w)
	if err == nil || err.Error() != "disk full" {
		t.Fatalf("Stream: %v, want the writer's error", err)
	}
	select {
	case serr := <-returned:
		if !errors.Is(serr, errWriterStopped) {
			t.Errorf("the source's Row returned %v, want errWriterStopped", serr)
		}
	default:
		t.Fatal("Stream returned while the source was still running")
	}
}

// A source's error comes back as it is, after the rows it sent before it; a source
// that panics fails the export with a retryable "panic" instead of the process.
func TestPipedSourceErrorAndPanic(t *testing.T) {
	upstream := jobs.Retryable("upstream", errors.New("connection reset"))
	src := funcSource(func(ctx context.Context, w RowWriter) error {
		w.Begin([]Column{{Name: "i"}}, -1)
		for i := range 10 {
			w.Row([]any{int64(i)})
		}
		return upstream
	})
	var w recordWriter
	if err := piped(src).Stream(t.Context(), Query{}, &w); err != upstream || len(w.rows) != 10 {
		t.Fatalf("Stream: %v with %d rows, want the source's error after its 10 rows", err, len(w.rows))
	}

	boom := funcSource(func(ctx context.Context, w RowWriter) error {
		w.Begin([]Column{{Name: "i"}}, -1)
		var cols []Column
		_ = cols[len(w.(*pipeWriter).out)+1] // out of range: a source's bug
		return nil
	})
	err := piped(boom).Stream(t.Context(), Query{}, &recordWriter{})
	var je *jobs.Error
	if !errors.As(err, &je) || je.Code != "panic" || je.Permanent {
		t.Fatalf("a panicking source: %v, want a retryable panic error", err)
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
	err := piped(src).Stream(ctx, Query{}, &w)
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
