package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/storetest"
)

// clockAt is a settable clock started at t.
var clockAt = storetest.ClockAt

func TestQueueStats(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, store.Options{Now: clk.Now})
	t0 := clk.Now()
	a := enqueue(t, st, store.NewJob{Kind: "report"})
	enqueue(t, st, store.NewJob{Kind: "report"})
	enqueue(t, st, store.NewJob{Kind: "report", RunAt: t0.Add(time.Hour)}) // not runnable yet
	enqueue(t, st, store.NewJob{Kind: "other"})
	clk.Advance(10 * time.Second)
	if got := claim(t, st, "w1"); got.ID != a.ID {
		t.Fatalf("claimed %s, want %s", got.ID, a.ID)
	}
	clk.Advance(5 * time.Second)
	now := clk.Now()

	qs, err := st.QueueStats(ctx, now, now.Add(-2*time.Second), "report", "none")
	if err != nil {
		t.Fatal(err)
	}
	zero := map[store.Status]int{}
	for _, s := range store.AllStatuses {
		zero[s] = 0
	}
	counts := func(pending, processing int) map[store.Status]int {
		m := map[store.Status]int{}
		for k, v := range zero {
			m[k] = v
		}
		m[store.StatusPending], m[store.StatusProcessing] = pending, processing
		return m
	}
	want := map[string]store.KindStats{
		"report": {Counts: counts(2, 1), OldestPendingRunAt: t0, LateHeartbeats: 1},
		"other":  {Counts: counts(1, 0), OldestPendingRunAt: t0},
		"none":   {Counts: zero},
	}
	if !reflect.DeepEqual(qs, want) {
		t.Fatalf("queue stats =\n%+v\nwant\n%+v", qs, want)
	}

	// A fresh heartbeat is not late; with nothing runnable the oldest pending is zero.
	if _, err := st.Heartbeat(ctx, a.ID, 1, 0, -1); err != nil {
		t.Fatal(err)
	}
	qs, err = st.QueueStats(ctx, t0.Add(-time.Minute), now.Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r := qs["report"]; r.LateHeartbeats != 0 || !r.OldestPendingRunAt.IsZero() {
		t.Fatalf("report stats = %+v, want no late heartbeat and no runnable pending job", r)
	}
	if _, ok := qs["none"]; ok {
		t.Fatal("a kind neither asked for nor stored is reported")
	}
}

func TestStalledJobs(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, store.Options{Now: clk.Now})
	silent := enqueue(t, st, store.NewJob{Kind: "report"})
	noRows := enqueue(t, st, store.NewJob{Kind: "report"})
	busy := enqueue(t, st, store.NewJob{Kind: "report"})
	other := enqueue(t, st, store.NewJob{Kind: "other"})
	for range 4 {
		claim(t, st, "w1")
	}
	clk.Advance(10 * time.Minute)
	for _, hb := range []struct {
		id   string
		rows int64
	}{{noRows.ID, 0}, {busy.ID, 5}} {
		if _, err := st.Heartbeat(ctx, hb.id, 1, hb.rows, -1); err != nil {
			t.Fatal(err)
		}
	}
	now := clk.Now()
	got, total, err := st.StalledJobs(ctx, "report", now.Add(-time.Minute), now.Add(-5*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id     string
		reason store.StallReason
	}
	var rows []row
	for _, s := range got {
		rows = append(rows, row{s.Job.ID, s.Reason})
	}
	want := []row{{silent.ID, store.StallLateHeartbeat}, {noRows.ID, store.StallNoRows}}
	if total != 2 || !reflect.DeepEqual(rows, want) {
		t.Fatalf("stalled = %v (total %d), want %v (total 2); %s is busy, %s another kind", rows, total, want, busy.ID, other.ID)
	}
	got, total, err = st.StalledJobs(ctx, "report", now.Add(-time.Minute), now.Add(-5*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || len(got) != 1 || got[0].Job.ID != silent.ID {
		t.Fatalf("limit 1: %d listed of %d, want the silent job of 2", len(got), total)
	}
}

// TestThroughputAndDurations runs jobs with known timings an hour and more apart and
// checks the buckets and nearest-rank percentiles of each window.
func TestThroughputAndDurations(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC) // on a 5-minute boundary
	clk := clockAt(t0.Add(-2 * time.Hour))
	st, _ := openStore(t, store.Options{Now: clk.Now})
	succeed := func(j store.Job) {
		t.Helper()
		if _, err := st.Succeed(ctx, j.ID, j.Attempt, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Two hours ago: waited 1 s, ran 1 s.
	enqueue(t, st, store.NewJob{Kind: "report"})
	clk.Advance(time.Second)
	first := claim(t, st, "w")
	clk.Advance(time.Second)
	succeed(first)

	clk.Advance(t0.Sub(clk.Now()))
	enqueue(t, st, store.NewJob{Kind: "report"}) // waits 2 s, runs 3 s, succeeds
	enqueue(t, st, store.NewJob{Kind: "report"}) // waits 4 s, runs 6 s, fails
	canceled := enqueue(t, st, store.NewJob{Kind: "report"})
	enqueue(t, st, store.NewJob{Kind: "other"})
	clk.Advance(2 * time.Second)
	ok := claim(t, st, "w")
	clk.Advance(2 * time.Second)
	bad := claim(t, st, "w")
	clk.Advance(time.Second)
	succeed(ok)
	clk.Advance(5 * time.Second)
	if _, err := st.Fail(ctx, bad.ID, bad.Attempt, store.AttemptError{Code: "bad", Message: "bad", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, canceled.ID); err == nil {
		t.Fatal("second cancel succeeded")
	}
	succeed(claim(t, st, "w")) // the other kind's job: counted nowhere below
	now := clk.Now()

	hour, err := st.Throughput(ctx, "report", now, 5*time.Minute, 12)
	if err != nil {
		t.Fatal(err)
	}
	if len(hour) != 12 || !hour[0].Start.Equal(t0.Add(-55*time.Minute)) || !hour[11].Start.Equal(t0) {
		t.Fatalf("hour buckets: %d from %v to %v", len(hour), hour[0].Start, hour[len(hour)-1].Start)
	}
	for i, b := range hour[:11] {
		if b.Succeeded+b.Failed+b.Canceled != 0 {
			t.Errorf("bucket %d (%v) = %+v, want empty", i, b.Start, b)
		}
	}
	if b := hour[11]; b.Succeeded != 1 || b.Failed != 1 || b.Canceled != 1 {
		t.Errorf("last bucket = %+v, want 1 succeeded, 1 failed, 1 canceled", b)
	}
	day, err := st.Throughput(ctx, "report", now, time.Hour, 24)
	if err != nil {
		t.Fatal(err)
	}
	hourStart := t0.Truncate(time.Hour)
	if !day[23].Start.Equal(hourStart) || day[23].Succeeded != 1 || day[23].Failed != 1 || day[23].Canceled != 1 {
		t.Errorf("day's last bucket = %+v", day[23])
	}
	if b := day[21]; !b.Start.Equal(hourStart.Add(-2*time.Hour)) || b.Succeeded != 1 || b.Failed+b.Canceled != 0 {
		t.Errorf("bucket two hours ago = %+v, want the old success", b)
	}

	s := time.Second
	for _, tc := range []struct {
		name      string
		since     time.Time
		wait, run store.Percentiles
	}{
		{"last hour", now.Add(-time.Hour), store.Percentiles{Count: 2, P50: 2 * s, P95: 4 * s}, store.Percentiles{Count: 2, P50: 3 * s, P95: 6 * s}},
		{"last day", now.Add(-24 * time.Hour), store.Percentiles{Count: 3, P50: 2 * s, P95: 4 * s}, store.Percentiles{Count: 3, P50: 3 * s, P95: 6 * s}},
		{"future", now.Add(time.Hour), store.Percentiles{}, store.Percentiles{}},
	} {
		ds, err := st.Durations(ctx, "report", tc.since)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Wait != tc.wait || ds.Run != tc.run {
			t.Errorf("%s: wait %+v run %+v, want wait %+v run %+v", tc.name, ds.Wait, ds.Run, tc.wait, tc.run)
		}
	}
}

// TestPercentilesNearestRank: of 1..20 s, the 50th is the 10th value and the 95th the 19th.
func TestPercentilesNearestRank(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, store.Options{Now: clk.Now})
	since := clk.Now()
	for i := 20; i >= 1; i-- {
		j := enqueue(t, st, store.NewJob{Kind: "report"})
		clk.Advance(time.Duration(i) * time.Second)
		if got := claim(t, st, "w"); got.ID != j.ID {
			t.Fatalf("claimed %s, want %s", got.ID, j.ID)
		}
		if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := st.Durations(ctx, "report", since)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Percentiles{Count: 20, P50: 10 * time.Second, P95: 19 * time.Second}); ds.Wait != want {
		t.Fatalf("wait = %+v, want %+v", ds.Wait, want)
	}
}

func TestTransitionsAfter(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, store.Options{Now: clk.Now})
	if id, err := st.LastEventID(ctx); err != nil || id != 0 {
		t.Fatalf("last event id of an empty store = %d, %v", id, err)
	}
	j := enqueue(t, st, store.NewJob{Kind: "report"})
	after, err := st.LastEventID(ctx)
	if err != nil || after == 0 {
		t.Fatalf("last event id = %d, %v", after, err)
	}
	clk.Advance(time.Second)
	claim(t, st, "w")
	clk.Advance(time.Second)
	if _, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "upstream", Message: "boom"}, 0); err != nil {
		t.Fatal(err)
	}
	ts, err := st.TransitionsAfter(ctx, after, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("transitions = %+v, want started and attempt_failed", ts)
	}
	started, failed := ts[0], ts[1]
	if started.Type != store.EventStarted || started.Kind != "report" || started.JobID != j.ID || started.Attempt != 1 ||
		!started.CreatedAt.Equal(j.CreatedAt) || started.At.Sub(started.CreatedAt) != time.Second || started.EventID <= after {
		t.Errorf("started = %+v", started)
	}
	if failed.Type != store.EventAttemptFailed || failed.Code != "upstream" || failed.Status != store.StatusPending ||
		failed.EventID <= started.EventID || failed.StartedAt.Sub(j.CreatedAt) != time.Second {
		t.Errorf("attempt_failed = %+v", failed)
	}
	if ts, err := st.TransitionsAfter(ctx, after, 1); err != nil || len(ts) != 1 || ts[0].Type != store.EventStarted {
		t.Errorf("limit 1 = %+v, %v", ts, err)
	}
}
