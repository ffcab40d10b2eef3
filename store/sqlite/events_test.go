package sqlite_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// TestEventsAfterTailsTheLog: EventsAfter pages through every event in id order,
// JobEventsSince through one job's, and EventRange tracks what is stored and what was
// ever assigned, also after pruning.
func TestEventsAfterTailsTheLog(t *testing.T) {
	ctx := context.Background()
	st, path := openStore(t, sqlite.Options{Now: newClock().Now})

	first, last, err := driverOf(st).EventRange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 || last != 0 {
		t.Fatalf("empty log: range %d..%d, want 1..0", first, last)
	}
	if evs, err := st.EventsAfter(ctx, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("empty log: EventsAfter = %v, %v", evs, err)
	}

	a := enqueue(t, st, store.NewJob{})
	b := enqueue(t, st, store.NewJob{})
	ca := claim(t, st, "w") // a: started
	if ca.ID != a.ID {
		t.Fatalf("claimed %s, want %s", ca.ID, a.ID)
	}
	if _, err := st.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	// a: accepted, b: accepted, a: started, b: canceled.
	var all []store.Event
	var after int64
	for {
		page, err := st.EventsAfter(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	type ev struct{ job, typ string }
	var got []ev
	for i, e := range all {
		got = append(got, ev{e.JobID, e.Type})
		if i > 0 && e.ID <= all[i-1].ID {
			t.Errorf("event %d has id %d after %d", i, e.ID, all[i-1].ID)
		}
	}
	want := []ev{{a.ID, store.EventAccepted}, {b.ID, store.EventAccepted}, {a.ID, store.EventStarted}, {b.ID, store.EventCanceled}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if all[2].Attempt != 1 || all[2].Status != store.StatusProcessing || string(all[2].Data) != `{"worker":"w"}` {
		t.Errorf("started event %+v", all[2])
	}

	bEvents, next, err := st.JobEventsSince(ctx, b.ID, id(all[1].ID-1), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bEvents) != 2 || bEvents[0].ID != all[1].ID || bEvents[1].ID != all[3].ID || next != id(all[3].ID) {
		t.Fatalf("b's events after %d: %+v, next %q", all[1].ID-1, bEvents, next)
	}
	if rest, next, err := st.JobEventsSince(ctx, b.ID, id(all[1].ID), 10); err != nil || len(rest) != 1 ||
		rest[0].Type != store.EventCanceled || rest[0].Cursor != id(all[3].ID) || next != rest[0].Cursor {
		t.Fatalf("b's events after its first: %+v, %q, %v", rest, next, err)
	}

	first, last, err = driverOf(st).EventRange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != all[0].ID || last != all[3].ID {
		t.Fatalf("range %d..%d, want %d..%d", first, last, all[0].ID, all[3].ID)
	}

	// Pruning lowers nothing: the newest id stays, and an emptied log starts after it.
	db := rawDB(t, path)
	if _, err := db.ExecContext(ctx, `DELETE FROM job_events WHERE id <= ?`, all[1].ID); err != nil {
		t.Fatal(err)
	}
	if first, last, err = driverOf(st).EventRange(ctx); err != nil || first != all[2].ID || last != all[3].ID {
		t.Fatalf("after pruning two: range %d..%d (%v), want %d..%d", first, last, err, all[2].ID, all[3].ID)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM job_events`); err != nil {
		t.Fatal(err)
	}
	if first, last, err = driverOf(st).EventRange(ctx); err != nil || first != all[3].ID+1 || last != all[3].ID {
		t.Fatalf("after pruning all: range %d..%d (%v), want %d..%d", first, last, err, all[3].ID+1, all[3].ID)
	}
	c := enqueue(t, st, store.NewJob{})
	if evs, err := st.EventsAfter(ctx, 0, 10); err != nil || len(evs) != 1 || evs[0].ID != all[3].ID+1 || evs[0].JobID != c.ID {
		t.Fatalf("after pruning all and one more job: %+v, %v", evs, err)
	}
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

func cursorsOf(evs []store.CursorEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Cursor
	}
	return out
}

// TestEventCursors: SQLite's cursor is the decimal event id, so every SSE id a client
// held before cursors became opaque still resumes where it did; EventHead is the newest
// id assigned; EventsKept says whether pruning took events after a cursor; a cursor that
// is no event id is ErrBadCursor.
func TestEventCursors(t *testing.T) {
	ctx := context.Background()
	st, path := openStore(t, sqlite.Options{Now: newClock().Now})
	if head, err := st.EventHead(ctx); err != nil || head != "0" {
		t.Fatalf("empty log: head %q, %v", head, err)
	}
	a := enqueue(t, st, store.NewJob{})
	b := enqueue(t, st, store.NewJob{})
	c := enqueue(t, st, store.NewJob{})
	head, err := st.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, next, err := st.EventsSince(ctx, "", 10)
	if err != nil || len(all) != 3 || next != head {
		t.Fatalf("from the start: %+v, next %q (head %q), %v", all, next, head, err)
	}
	for i, j := range []store.Job{a, b, c} {
		if all[i].JobID != j.ID || all[i].Cursor != id(all[i].ID) {
			t.Errorf("event %d: %+v, want job %s with its id as cursor", i, all[i], j.ID)
		}
	}
	// Each event's cursor resumes just after it; ids as clients sent them before (a
	// sign, leading zeros) still read, and the next cursor comes back canonical.
	for _, tc := range []struct {
		cursor string
		want   []store.CursorEvent
		next   string
	}{
		{all[0].Cursor, all[1:], head},
		{"+" + all[1].Cursor, all[2:], head},
		{"00" + all[2].Cursor, nil, all[2].Cursor},
	} {
		got, next, err := st.EventsSince(ctx, tc.cursor, 10)
		if err != nil || !slices.Equal(cursorsOf(got), cursorsOf(tc.want)) || next != tc.next {
			t.Errorf("since %q: %+v, next %q, %v; want %+v, next %q", tc.cursor, got, next, err, tc.want, tc.next)
		}
	}
	for _, bad := range []string{"x", "-1", "1.5", "1e3", " 1", "9223372036854775808"} {
		if _, _, err := st.EventsSince(ctx, bad, 10); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("since %q: %v, want ErrBadCursor", bad, err)
		}
		if _, _, err := st.JobEventsSince(ctx, a.ID, bad, 10); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("job since %q: %v, want ErrBadCursor", bad, err)
		}
		if _, err := st.EventsKept(ctx, bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("kept %q: %v, want ErrBadCursor", bad, err)
		}
	}

	// Pruning a's event: a client that saw it, or nothing after it, lost nothing; one
	// from before it lost it; one ahead of the log is not from it.
	if _, err := rawDB(t, path).ExecContext(ctx, `DELETE FROM job_events WHERE id = ?`, all[0].ID); err != nil {
		t.Fatal(err)
	}
	for cursor, want := range map[string]bool{
		"": false, "0": false, all[0].Cursor: true, all[1].Cursor: true, head: true, id(all[2].ID + 1): false,
	} {
		if kept, err := st.EventsKept(ctx, cursor); err != nil || kept != want {
			t.Errorf("kept %q after pruning the first event: %v, %v; want %v", cursor, kept, err, want)
		}
	}
}
