package export

import (
	"context"
	"encoding/json"
	"log/slog"
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
	// From is where a resumed attempt continues (ARCHITECTURE.md, "Checkpoints and
	// resume"): the source sends the rows after the first From.Rows, finding its place
	// with From.Token. nil: from the first row. It is set only for a source whose
	// Resumable says yes for the report.
	From *Position
	// Place, when set, is given the source's Placer before the source calls Begin; a
	// source that cannot resume leaves it alone.
	Place func(Placer)
	// Warn, when set, takes a message about the rows that the export's page should
	// show (an HTTP source's keys that came too late to be columns); nil: none.
	Warn func(string)
}

// Position is how far a file got: its first Rows rows are written, and Token is what
// the source needs to continue after them. Only the source that made a token reads it.
type Position struct {
	Rows  int64           `json:"rows"`
	Token json.RawMessage `json:"token,omitempty"`
}

// A Placer is how a resumable source tells the writer where it stands: called on the
// writer's goroutine when rows rows have been written, last being the values of the
// last of them (valid during the call only), it returns the token that continues after
// them. A piped source runs ahead of the writer, so it must be able to answer for any
// rows between the last call and what it has sent, and be safe to call while it streams.
type Placer func(rows int64, last []any) (json.RawMessage, error)

// A Resumer is a source that can continue some of its reports after a position
// (Query.From). Resumable says whether it can for r and, when not, why, in words for
// the report's page.
type Resumer interface {
	Resumable(r Report) (ok bool, why string)
}

// A Logged source logs what no export's page shows, such as an HTTP source's retried
// pages; the composition root gives it the server's logger before any export runs.
type Logged interface {
	SetLogger(*slog.Logger)
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
