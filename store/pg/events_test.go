package pg_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
	"sheetq/store/pg"
)

// tail reads with EventsSince from cursor, limit at a time, until it holds want events.
// Delivery waits until every older transaction in the cluster has ended, and another
// process's transaction (autovacuum, another package's test) may hold that horizon back
// for a moment: the read is repeated until the condition holds, and no time is asserted.
// Reading more than want is a failure.
func tail(t *testing.T, st *store.Store, cursor string, want, limit int) ([]store.CursorEvent, string) {
	t.Helper()
	var got []store.CursorEvent
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		evs, next, err := st.EventsSince(ctx, cursor, limit)
		if err != nil {
			t.Fatalf("events since %q: %v", cursor, err)
		}
		got, cursor = append(got, evs...), next
		if len(got) > want {
			t.Fatalf("read %d events, want %d: %v", len(got), want, eventIDs(got))
		}
		if len(got) == want {
			return got, cursor
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("read %d events in 30 s, want %d: %v", len(got), want, eventIDs(got))
		}
	}
}

func eventIDs(evs []store.CursorEvent) []int64 {
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

// lateTx opens a transaction on a connection of its own that appends an event to job id
// and stays open, as a node whose transaction took an event id and has not committed.
func lateTx(t *testing.T, dsn, jobID string) (pgx.Tx, int64) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt)
		VALUES ($1, now(), 'late', 'PENDING', 0) RETURNING id`, jobID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return tx, id
}

// TestTailerSeesEventCommittedLate is issue 17's deterministic case: transaction A takes
// an event id and stays open, B takes a later id and commits. Reading with id > cursor
// (EventsAfter) delivers B, moves past A's id and never delivers A. The commit-safe
// cursor delivers neither while A is open (A is below the horizon's xmin, B's xid is
// above A's), then both once A commits, A first, each once.
func TestTailerSeesEventCommittedLate(t *testing.T) {
	t.Run("naive id cursor skips it", func(t *testing.T) {
		dsn := freshSchema(t)
		st := openStore(t, dsn, pg.Options{})
		j := enqueue(t, st)
		evs, err := st.EventsAfter(ctx, 0, 100)
		if err != nil || len(evs) != 1 {
			t.Fatalf("accepted: %v, %v", evs, err)
		}
		cursor := evs[0].ID

		txA, idA := lateTx(t, dsn, j.ID)
		if err := st.AppendEvent(ctx, j.ID, "b", nil); err != nil {
			t.Fatal(err)
		}
		evs, err = st.EventsAfter(ctx, cursor, 100)
		if err != nil || len(evs) != 1 || evs[0].ID <= idA {
			t.Fatalf("B while A is open: %v, %v (A has id %d)", evs, err, idA)
		}
		cursor = evs[0].ID
		if err := txA.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err = st.EventsAfter(ctx, cursor, 100)
		if err != nil || len(evs) != 0 {
			t.Fatalf("after A committed: %v, %v", evs, err)
		}
		// A's event is in the log, behind the cursor: no later read returns it.
		all, err := st.EventsAfter(ctx, 0, 100)
		if err != nil || len(all) != 3 || all[1].ID != idA {
			t.Fatalf("log: %v, %v", all, err)
		}
	})

	t.Run("commit-safe cursor delivers both", func(t *testing.T) {
		dsn := freshSchema(t)
		st := openStore(t, dsn, pg.Options{})
		j := enqueue(t, st)
		got, cursor := tail(t, st, "", 1, 100)
		if got[0].Type != "accepted" {
			t.Fatalf("first event %+v, want accepted", got[0])
		}

		txA, idA := lateTx(t, dsn, j.ID)
		if err := st.AppendEvent(ctx, j.ID, "b", nil); err != nil {
			t.Fatal(err)
		}
		// While A is open, nothing after it is delivered and the cursor stays put.
		evs, next, err := st.EventsSince(ctx, cursor, 100)
		if err != nil || len(evs) != 0 || next != cursor {
			t.Fatalf("while A is open: %v, %q, %v; want none and %q", eventIDs(evs), next, err, cursor)
		}
		if err := txA.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got, cursor = tail(t, st, cursor, 2, 100)
		if got[0].ID != idA || got[0].Type != "late" || got[1].Type != "b" {
			t.Fatalf("after A committed: %+v, want A (id %d) then B", got, idA)
		}
		if evs, next, err := st.EventsSince(ctx, cursor, 100); err != nil || len(evs) != 0 || next != cursor {
			t.Fatalf("again: %v, %q, %v; want none", eventIDs(evs), next, err)
		}
		// The order is stable: a reader from the start sees the same three.
		all, _ := tail(t, st, "", 3, 1)
		if !slices.Equal(eventIDs(all), []int64{1, idA, got[1].ID}) {
			t.Fatalf("from the start: %v", eventIDs(all))
		}
	})

	t.Run("an aborted transaction's event is never delivered", func(t *testing.T) {
		dsn := freshSchema(t)
		st := openStore(t, dsn, pg.Options{})
		j := enqueue(t, st)
		_, cursor := tail(t, st, "", 1, 100)
		txA, _ := lateTx(t, dsn, j.ID)
		if err := st.AppendEvent(ctx, j.ID, "b", nil); err != nil {
			t.Fatal(err)
		}
		if err := txA.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := tail(t, st, cursor, 1, 100)
		if got[0].Type != "b" {
			t.Fatalf("after A rolled back: %+v, want B only", got)
		}
	})
}

// TestCursorResumesOnAnotherNode: a cursor handed out by one store (node 1), at a batch's
// end or from any event, resumes on another store of the same database (node 2) with no
// gap and no duplicate, also across a transaction that commits late, as Last-Event-ID
// taken from one node and sent to another.
func TestCursorResumesOnAnotherNode(t *testing.T) {
	dsn := freshSchema(t)
	node1 := openStore(t, dsn, pg.Options{})
	node2 := openStore(t, dsn, pg.Options{})
	j := enqueue(t, node1)
	enqueue(t, node2)
	enqueue(t, node1)

	// Node 1 reads two of the three, a batch smaller than the log.
	first, cursor := tail(t, node1, "", 2, 2)
	txA, idA := lateTx(t, dsn, j.ID)
	if err := node2.AppendEvent(ctx, j.ID, "b", nil); err != nil {
		t.Fatal(err)
	}
	enqueue(t, node1)
	// Node 1 reads what it may: the third accept; the rest waits behind A.
	more, cursor := tail(t, node1, cursor, 1, 100)
	first = append(first, more...)
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Node 2 goes on from node 1's cursor: A's event, B's, the last accept.
	rest, _ := tail(t, node2, cursor, 3, 1)
	if rest[0].ID != idA {
		t.Fatalf("node 2 first read %+v, want A's event %d", rest[0], idA)
	}
	delivered := append(slices.Clone(first), rest...)
	all, _ := tail(t, node1, "", 6, 100)
	if !slices.Equal(eventIDs(delivered), eventIDs(all)) {
		t.Fatalf("node 1 then node 2 delivered %v, the log from the start is %v", eventIDs(delivered), eventIDs(all))
	}
	ids := eventIDs(all)
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("delivered ids %v, want each of 1..6 once", ids)
	}

	// Each event's own cursor resumes just after it, on either node.
	for i, e := range all {
		got, _ := tail(t, node2, e.Cursor, len(all)-1-i, 100)
		if !slices.Equal(eventIDs(got), eventIDs(all[i+1:])) {
			t.Fatalf("after event %d's cursor: %v, want %v", e.ID, eventIDs(got), eventIDs(all[i+1:]))
		}
	}
}

// TestEventsSinceCursors: an empty cursor is the start; one EventsSince did not hand out
// is store.ErrBadCursor, so a caller can tell a client to start over.
func TestEventsSinceCursors(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	enqueue(t, st)
	got, next := tail(t, st, "", 1, 100)
	if got[0].Cursor != next || next == "" {
		t.Fatalf("cursor %q, next %q", got[0].Cursor, next)
	}
	for _, bad := range []string{"1", "x.1", "1.x", "1.-1", "-1.1", "+1.1", "01.1", "1.01", "1.2.3", "1.", ".1", " 1.1", "18446744073709551616.1"} {
		if _, _, err := st.EventsSince(ctx, bad, 10); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
		}
	}

	// Transaction ids compare as numbers: rows written with xids 10 then 9 (long ended)
	// come back 9 first.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt, xid)
		VALUES ($1, now(), 'ten', 'PENDING', 0, '10'), ($1, now(), 'nine', 'PENDING', 0, '9')`, got[0].JobID); err != nil {
		t.Fatal(err)
	}
	all, _ := tail(t, st, "", 3, 1)
	if all[0].Type != "nine" || all[1].Type != "ten" || all[0].Cursor != "9.3" || all[1].Cursor != "10.2" {
		t.Fatalf("order %+v, want nine (9.3) then ten (10.2), then accepted", all)
	}
}

// TestEventHeadAndKept: the head is a position that every event of a transaction open
// when it is read, or begun later, comes after; EventsKept accepts the head and every
// event's cursor while nothing after them was pruned, and refuses a cursor from before a
// pruned event, one ahead of the log, and a SQLite event id; other text is
// store.ErrBadCursor.
func TestEventHeadAndKept(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	empty, err := st.EventHead(ctx)
	if err != nil || !strings.HasSuffix(empty, ".0") {
		t.Fatalf("head of an empty log %q, %v; want <xid>.0", empty, err)
	}
	if kept, err := st.EventsKept(ctx, empty); err != nil || !kept {
		t.Fatalf("empty log's head kept: %v, %v", kept, err)
	}
	j := enqueue(t, st)
	txA, idA := lateTx(t, dsn, j.ID)
	head, err := st.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvent(ctx, j.ID, "b", nil); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A was open when the head was read, and B began after: both come after it. The
	// accept may too, when a transaction elsewhere in the cluster held xmin back.
	var got []store.CursorEvent
	for cursor := head; len(got) == 0 || got[len(got)-1].Type != "b"; {
		var evs []store.CursorEvent
		evs, cursor = tail(t, st, cursor, 1, 1)
		got = append(got, evs...)
	}
	if types := eventTypes(got); !slices.Equal(types, []string{"late", "b"}) && !slices.Equal(types, []string{"accepted", "late", "b"}) {
		t.Fatalf("after the head: %v, want [late b] (or the accept first)", types)
	}
	if got[len(got)-2].ID != idA {
		t.Fatalf("late event %d, want A's %d", got[len(got)-2].ID, idA)
	}
	for _, e := range got {
		if store.CompareCursors(e.Cursor, head) <= 0 {
			t.Errorf("event %d's cursor %q is not after the head %q", e.ID, e.Cursor, head)
		}
	}
	all, last := tail(t, st, "", 3, 100)
	for _, c := range []string{empty, head, all[0].Cursor, all[1].Cursor, last} {
		if kept, err := st.EventsKept(ctx, c); err != nil || !kept {
			t.Errorf("cursor %q kept: %v, %v; want true", c, kept, err)
		}
	}
	x, _, _ := strings.Cut(last, ".")
	for _, c := range []string{"3", "0", "99999999999.1", x + ".99"} {
		if kept, err := st.EventsKept(ctx, c); err != nil || kept {
			t.Errorf("cursor %q kept: %v, %v; want false", c, kept, err)
		}
	}
	if _, err := st.EventsKept(ctx, "1.x"); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("malformed cursor: %v, want ErrBadCursor", err)
	}

	// Retention takes the accept (id 1): a client at the start, or at the empty log's
	// head, missed it; one that saw it missed nothing.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM job_events WHERE id = $1`, all[0].ID); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{"": false, empty: false, all[0].Cursor: true, last: true} {
		if kept, err := st.EventsKept(ctx, c); err != nil || kept != want {
			t.Errorf("after pruning the accept, cursor %q kept: %v, %v; want %v", c, kept, err, want)
		}
	}
}

// TestEventsKeptAcrossAGap: ids that transactions took from the sequence and rolled
// back are never stored; a client resuming from the head of a log that began with such a
// gap lost nothing and must not be sent a snapshot (TestClusterFaults saw one, once).
// Deleting the first event after the head then counts as pruning, by whatever path.
func TestEventsKeptAcrossAGap(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	head, err := st.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for range 3 { // a node that died mid-transaction, say
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT nextval('job_events_id_seq')`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	j := enqueue(t, st)
	evs, _ := tail(t, st, head, 1, 100)
	if evs[0].ID < 4 {
		t.Fatalf("the first stored event has id %d; the gap before it is missing", evs[0].ID)
	}
	if kept, err := st.EventsKept(ctx, head); err != nil || !kept {
		t.Fatalf("the head before a gap of unused ids: kept %v, %v; want true", kept, err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM job_events WHERE job_id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if kept, err := st.EventsKept(ctx, head); err != nil || kept {
		t.Fatalf("the head after the event after it was deleted: kept %v, %v; want false", kept, err)
	}
	if kept, err := st.EventsKept(ctx, evs[0].Cursor); err != nil || !kept {
		t.Fatalf("the deleted event's own cursor: kept %v, %v; want true", kept, err)
	}
	// TRUNCATE has no rows to look at: every id assigned counts as pruned.
	j2 := enqueue(t, st)
	evs2, _ := tail(t, st, evs[0].Cursor, 1, 100)
	if evs2[0].JobID != j2.ID {
		t.Fatalf("event %+v, want the accept of %s", evs2[0], j2.ID)
	}
	if _, err := conn.Exec(ctx, `TRUNCATE job_events`); err != nil {
		t.Fatal(err)
	}
	if kept, err := st.EventsKept(ctx, evs[0].Cursor); err != nil || kept {
		t.Fatalf("a cursor before a truncated event: kept %v, %v; want false", kept, err)
	}
	if kept, err := st.EventsKept(ctx, evs2[0].Cursor); err != nil || !kept {
		t.Fatalf("the last event's cursor after TRUNCATE: kept %v, %v; want true", kept, err)
	}
}

func eventTypes(evs []store.CursorEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestJobEventsSince: one job's events after a cursor, in the same commit-safe order;
// a cursor from the all-jobs read resumes it.
func TestJobEventsSince(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	a, b := enqueue(t, st), enqueue(t, st)
	if err := st.AppendEvent(ctx, a.ID, "note", nil); err != nil {
		t.Fatal(err)
	}
	all, _ := tail(t, st, "", 3, 100)
	evs, next, err := st.JobEventsSince(ctx, a.ID, "", 100)
	if err != nil || !slices.Equal(eventIDs(evs), []int64{all[0].ID, all[2].ID}) || next != all[2].Cursor {
		t.Fatalf("a's events: %v, %q, %v", eventIDs(evs), next, err)
	}
	// From b's accept (a cursor of the all-jobs read), a has one event left.
	if evs, _, err := st.JobEventsSince(ctx, a.ID, all[1].Cursor, 100); err != nil || len(evs) != 1 || evs[0].Type != "note" {
		t.Fatalf("a's events after b's accept: %+v, %v", evs, err)
	}
	if evs, next, err := st.JobEventsSince(ctx, b.ID, all[1].Cursor, 100); err != nil || len(evs) != 0 || next != all[1].Cursor {
		t.Fatalf("b's events after its accept: %+v, %q, %v", evs, next, err)
	}
	if _, _, err := st.JobEventsSince(ctx, a.ID, "x", 1); !errors.Is(err, store.ErrBadCursor) {
		t.Fatalf("malformed cursor: %v", err)
	}
}

// TestTransitionsSinceCountsLateCommit: the metrics' tail waits for a transaction that
// took its event id first and commits last, then reads both transitions in order with
// their job's kind and times.
func TestTransitionsSinceCountsLateCommit(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	j := enqueue(t, st)
	_, cursor := tail(t, st, "", 1, 100)
	txA, idA := lateTx(t, dsn, j.ID)
	if err := st.AppendEvent(ctx, j.ID, "b", json.RawMessage(`{"code":"upstream"}`)); err != nil {
		t.Fatal(err)
	}
	if ts, next, err := st.TransitionsSince(ctx, cursor, 100); err != nil || len(ts) != 0 || next != cursor {
		t.Fatalf("while A is open: %+v, %q, %v; want none", ts, next, err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var ts []store.Transition
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(ts) < 2 {
		more, next, err := st.TransitionsSince(ctx, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		ts, cursor = append(ts, more...), next
		if len(ts) < 2 {
			<-tick.C
		}
	}
	if len(ts) != 2 || ts[0].EventID != idA || ts[0].Type != "late" || ts[1].Type != "b" || ts[1].Code != "upstream" ||
		ts[1].Kind != "test" || !ts[1].CreatedAt.Equal(j.CreatedAt) || !ts[1].StartedAt.IsZero() || ts[1].JobID != j.ID {
		t.Fatalf("transitions %+v, want A's late event, then b with its job's kind and times", ts)
	}
	if ts, next, err := st.TransitionsSince(ctx, cursor, 100); err != nil || len(ts) != 0 || next != cursor {
		t.Fatalf("again: %+v, %q, %v; want none", ts, next, err)
	}
}
