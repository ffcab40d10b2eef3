package store

import (
	"regexp"
	"testing"
	"time"
)

func TestNewIDShapeAndOrder(t *testing.T) {
	shape := regexp.MustCompile(`^[2-7a-z]{26}$`)
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 20000; i++ {
		id := NewID()
		if !shape.MatchString(id) {
			t.Fatalf("id %q: want 26 characters from [2-7a-z]", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		// Ids made in an earlier millisecond sort before later ones; within one
		// millisecond the random part decides.
		if prev != "" && idMS(t, id) > idMS(t, prev) && id < prev {
			t.Fatalf("id %q sorts before the earlier %q", id, prev)
		}
		prev = id
	}

	// Across milliseconds the whole id sorts in creation order.
	a := NewID()
	for start := time.Now().UnixMilli(); time.Now().UnixMilli() == start; {
	}
	if b := NewID(); b <= a {
		t.Fatalf("id %q made after %q sorts before it", b, a)
	}

	// The prefix is the creation time: the first 48 bits decode to now.
	id := NewID()
	ms := idMS(t, id)
	if d := time.Since(time.UnixMilli(ms)); d < 0 || d > time.Minute {
		t.Fatalf("id %q encodes %s, %s from now", id, time.UnixMilli(ms).UTC(), d)
	}
}

// idMS decodes the millisecond an id was made in.
func idMS(t *testing.T, id string) int64 {
	t.Helper()
	raw, err := idEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 {
		t.Fatalf("decode %q: %v (%d bytes)", id, err, len(raw))
	}
	var ms int64
	for _, c := range raw[:6] {
		ms = ms<<8 | int64(c)
	}
	return ms
}
