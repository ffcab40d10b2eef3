package store_test

import (
	"errors"
	"testing"

	"sheetq/store"
)

// TestCompareCursors: cursors order by their numbers, first number first, as the stores
// deliver them; "" is the start.
func TestCompareCursors(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "0", -1}, {"7", "7", 0}, {"9", "10", -1}, {"10", "9", 1},
		{"123", "124", -1}, {"9.99", "10.1", -1}, {"10.2", "10.10", -1}, {"10.10", "10.10", 0},
		{"10.5", "10", 1}, {"18446744073709551615.1", "9.9223372036854775807", 1},
	} {
		if got := store.CompareCursors(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareCursors(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := store.CompareCursors(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareCursors(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// TestCursorRoundTrip: what MakeCursor writes ParseCursor reads back, in the one spelling
// CompareCursors orders; any other text, count of numbers or spelling is ErrBadCursor.
func TestCursorRoundTrip(t *testing.T) {
	for _, parts := range [][]uint64{{0}, {7}, {18446744073709551615}, {9, 10}, {10, 0}} {
		c := store.MakeCursor(parts...)
		got := make([]uint64, len(parts))
		if err := store.ParseCursor(c, got); err != nil {
			t.Fatalf("ParseCursor(%q): %v", c, err)
		}
		for i := range parts {
			if got[i] != parts[i] {
				t.Fatalf("ParseCursor(MakeCursor(%v)) = %v", parts, got)
			}
		}
	}
	if c1, c2 := store.MakeCursor(9, 99), store.MakeCursor(10, 1); store.CompareCursors(c1, c2) >= 0 {
		t.Errorf("CompareCursors(%q, %q) >= 0, want the first before the second", c1, c2)
	}
	two := make([]uint64, 2)
	if err := store.ParseCursor("", two); err != nil || two[0] != 0 || two[1] != 0 {
		t.Errorf(`ParseCursor("") = %v, %v; want the start`, two, err)
	}
	for _, bad := range []string{"x", "1", "1.2.3", "01.2", "1.02", "+1.2", "-1.2", "1.", ".1", "1.2 ", "18446744073709551616.1"} {
		if err := store.ParseCursor(bad, two); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
}
