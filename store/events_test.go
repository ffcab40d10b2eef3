package store_test

import (
	"context"
	"slices"
	"testing"

	"sheetq/store"
)

// TestEventsAfterTailsTheLog: EventsAfter pages through every event in id order,
// JobEventsAfter through one job's, and EventRange tracks what is stored and what was
// ever assigned, also after pruning.
func TestEventsAfterTailsTheLog(t *testing.T) {
	ctx := context.Background()
	st, path := openStore(t, store.Options{Now: newClock().Now})

	first, last, err := st.EventRange(ctx)
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

	bEvents, err := st.JobEventsAfter(ctx, b.ID, all[1].ID-1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bEvents) != 2 || bEvents[0].ID != all[1].ID || bEvents[1].ID != all[3].ID {
		t.Fatalf("b's events after %d: %+v", all[1].ID-1, bEvents)
	}
	if rest, err := st.JobEventsAfter(ctx, b.ID, all[1].ID, 10); err != nil || len(rest) != 1 || rest[0].Type != store.EventCanceled {
		t.Fatalf("b's events after its first: %+v, %v", rest, err)
	}

	first, last, err = st.EventRange(ctx)
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
	if first, last, err = st.EventRange(ctx); err != nil || first != all[2].ID || last != all[3].ID {
		t.Fatalf("after pruning two: range %d..%d (%v), want %d..%d", first, last, err, all[2].ID, all[3].ID)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM job_events`); err != nil {
		t.Fatal(err)
	}
	if first, last, err = st.EventRange(ctx); err != nil || first != all[3].ID+1 || last != all[3].ID {
		t.Fatalf("after pruning all: range %d..%d (%v), want %d..%d", first, last, err, all[3].ID+1, all[3].ID)
	}
	c := enqueue(t, st, store.NewJob{})
	if evs, err := st.EventsAfter(ctx, 0, 10); err != nil || len(evs) != 1 || evs[0].ID != all[3].ID+1 || evs[0].JobID != c.ID {
		t.Fatalf("after pruning all and one more job: %+v, %v", evs, err)
	}
}
