package store

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadCursor is the error for an event cursor that the store did not hand out.
var ErrBadCursor = errors.New("malformed event cursor")

// CursorEvent is an event and the cursor that resumes just after it: its SSE id.
type CursorEvent struct {
	Event
	// Cursor is opaque to clients: they pass it back to the store that handed it out,
	// or to any store of the same database.
	Cursor string
}

// An event cursor is a position in the event log, opaque to everything but the driver
// that handed it out and to the core, which owns its form: one or more numbers in
// decimal without leading zeros, joined by dots, ordered by those numbers, first number
// first; "" is the start. A driver picks what its numbers mean (SQLite: the event id;
// PostgreSQL: the writing transaction's id, then the event id) and writes and reads them
// only with MakeCursor and ParseCursor, so that CompareCursors orders any driver's
// cursors as its reads deliver their events, and one position has one spelling.

// MakeCursor writes the cursor of a position given as its numbers.
func MakeCursor(parts ...uint64) string {
	b := make([]byte, 0, 24*len(parts))
	for i, p := range parts {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, p, 10)
	}
	return string(b)
}

// ParseCursor reads into parts a cursor that MakeCursor wrote with len(parts) numbers;
// "" is the start, every part zero. Any other text, another count of numbers, or a
// number spelled otherwise (a sign, a leading zero) is ErrBadCursor.
func ParseCursor(c string, parts []uint64) error {
	if c == "" {
		clear(parts)
		return nil
	}
	rest := c
	for i := range parts {
		var x string
		var more bool
		x, rest, more = strings.Cut(rest, ".")
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil || x != strconv.FormatUint(n, 10) || more != (i < len(parts)-1) {
			return fmt.Errorf("%w: %q", ErrBadCursor, c)
		}
		parts[i] = n
	}
	return nil
}

// CompareCursors orders two cursors (-1, 0, +1) as the reads deliver their events, so
// that the hub can tell whether an event is behind a client's position without knowing
// which driver wrote either.
func CompareCursors(a, b string) int {
	for a != "" || b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		// Without leading zeros, the longer number is the larger one, and numbers of one
		// length compare as text: no parsing, no allocation on the stream's hot path.
		if c := cmp.Compare(len(x), len(y)); c != 0 {
			return c
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}
