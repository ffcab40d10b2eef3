package export

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"sheetq/jobs"
)

// Resumable implements Resumer: a report whose "-- resume: COLUMN" names a unique
// column continues after the last value of it written (resumeQuery).
func (s *sqlSource) Resumable(r Report) (bool, string) {
	if r.Resume == "" {
		return false, "add a \"-- resume: COLUMN\" line naming a unique column of the query, and an export continues after the last value written"
	}
	return true, ""
}

// Resumable implements Resumer, as for any SQL source: the csv files are tables.
func (c *csvSource) Resumable(r Report) (bool, string) { return (*sqlSource)(nil).Resumable(r) }

// resumeValue is a "-- resume:" column's value in a checkpoint, typed so that the
// resumed query compares it as the first attempt's rows had it.
type resumeValue struct {
	Int   *int64   `json:"int,omitempty"`
	Float *float64 `json:"float,omitempty"`
	Text  *string  `json:"text,omitempty"`
	Time  *string  `json:"time,omitempty"` // RFC 3339 with nanoseconds
}

// encodeResumeValue is the token after a row whose resume column holds v.
func encodeResumeValue(v any) (json.RawMessage, error) {
	var r resumeValue
	switch t := v.(type) {
	case int64:
		r.Int = &t
	case int:
		n := int64(t)
		r.Int = &n
	case int32:
		n := int64(t)
		r.Int = &n
	case float64:
		r.Float = &t
	case string:
		r.Text = &t
	case []byte:
		s := string(t)
		r.Text = &s
	case time.Time:
		s := t.Format(time.RFC3339Nano)
		r.Time = &s
	case nil:
		return nil, fmt.Errorf("the resume column is NULL in the last row written")
	default:
		return nil, fmt.Errorf("the resume column holds a %T, which an export cannot resume after", v)
	}
	return json.Marshal(r)
}

// decode is the value the resumed query compares the column with.
func (r resumeValue) decode() (any, error) {
	switch {
	case r.Int != nil:
		return *r.Int, nil
	case r.Float != nil:
		return *r.Float, nil
	case r.Text != nil:
		return *r.Text, nil
	case r.Time != nil:
		return time.Parse(time.RFC3339Nano, *r.Time)
	}
	return nil, fmt.Errorf("a resume token without a value")
}

// resumeArgs is how many arguments resumeQuery adds to the report's.
func resumeArgs(q Query) int {
	if q.From != nil && q.From.Rows > 0 {
		return 1
	}
	return 0
}

// resumeQuery wraps a report's bound query (query, args) so that its rows come in the
// order of the "-- resume:" column on every attempt, and, for an attempt that resumes
// (q.From), only those after the value the checkpoint names: the rows the file already
// holds are not read again. The column must be unique, or rows sharing the last value
// written would be lost at the seam (docs/reports-and-sources.md says so).
func (s *sqlSource) resumeQuery(query string, args []any, q Query) (string, []any, error) {
	col := s.dialect.quote(q.Report.Resume)
	// The newlines keep a trailing -- comment from swallowing what follows.
	wrapped := "SELECT * FROM (\n" + query + "\n) AS sheetq_resume"
	if resumeArgs(q) > 0 {
		var rv resumeValue
		if err := json.Unmarshal(q.From.Token, &rv); err != nil {
			return "", nil, jobs.Permanent("resume", fmt.Errorf("report %s: the checkpoint's resume value: %w", q.Report.ID, err))
		}
		v, err := rv.decode()
		if err != nil {
			return "", nil, jobs.Permanent("resume", fmt.Errorf("report %s: the checkpoint's resume value: %w", q.Report.ID, err))
		}
		args = append(args, v)
		ph := "?"
		if s.dialect.placeholders() == DollarNumbers {
			ph = "$" + strconv.Itoa(len(args))
		}
		wrapped += " WHERE " + col + " > " + ph
	}
	return wrapped + " ORDER BY " + col, args, nil
}

// quote quotes an identifier for the dialect.
func (d sqlDialect) quote(name string) string {
	if d == mysqlDialect {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}
