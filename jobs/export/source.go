package export

import (
	"context"
	"time"
)

// Column describes one column of a row stream.
type Column struct {
	Name string
	Type Type
	// Label is the column's header text; empty: Name. A report's column lines set it
	// ("-- column: NAME "Label" TYPE(FORMAT)").
	Label string
	// Format is the Excel number format code of the column's cells, such as "#,##0.00";
	// empty: the writer's default for Type.
	Format string
}

// Query is one execution of a report against its source.
type Query struct {
	Report Report
	// Params are validated and canonical: int64, float64, bool, or string for text,
	// date ("2006-01-02") and datetime (RFC 3339, UTC).
	Params map[string]any
	// Attempt is the job's attempt number, counting from 1. Only the demo source uses it,
	// to fail the first attempts on purpose.
	Attempt int
	// Time is when the export runs; the file's zip entries carry it. Zero means the
	// time the file is written.
	Time time.Time
}

// Source runs queries and pushes their rows, so that it owns (and closes) whatever it
// reads from and the writer never sees a connection or a file.
type Source interface {
	// Stream runs q, calls w.Begin once and then w.Row for each row, in order. It returns
	// w's errors unchanged and returns soon after ctx is done.
	Stream(ctx context.Context, q Query, w RowWriter) error
}

// RowWriter receives a row stream.
type RowWriter interface {
	// Begin announces the columns and the number of rows to come (-1 if unknown).
	Begin(cols []Column, total int64) error
	// Row takes one row, one value per column: nil, int64 (or other ints), float64,
	// string, []byte, bool or time.Time. The writer does not keep values, so a source may reuse it.
	Row(values []any) error
}
