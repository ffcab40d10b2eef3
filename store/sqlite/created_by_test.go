package sqlite_test

import (
	"testing"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// A job records the name of the token that created it; a job created without one has
// none. Both survive a fresh read and a claim (every RETURNING scans the column).
func TestEnqueueRecordsCreatedBy(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	j := enqueue(t, st, store.NewJob{CreatedBy: "ci"})
	if j.CreatedBy != "ci" {
		t.Fatalf("enqueued CreatedBy = %q, want ci", j.CreatedBy)
	}
	if got := get(t, st, j.ID); got.CreatedBy != "ci" {
		t.Fatalf("read back CreatedBy = %q, want ci", got.CreatedBy)
	}
	if c := claim(t, st, "w1"); c.ID != j.ID || c.CreatedBy != "ci" {
		t.Fatalf("claimed %s with CreatedBy %q, want %s with ci", c.ID, c.CreatedBy, j.ID)
	}
	if anon := enqueue(t, st, store.NewJob{}); anon.CreatedBy != "" || get(t, st, anon.ID).CreatedBy != "" {
		t.Fatalf("a job without a token has CreatedBy %q", anon.CreatedBy)
	}
}
