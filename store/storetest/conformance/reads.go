package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"sheetq/store"
)

// RunReads runs every read case, each on a store of its own from open (the same open as
// Run's).
func RunReads(t *testing.T, open func(t *testing.T, o Options) Harness) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness, r *store.Store)
	}{
		{"GetUnknown", testGetUnknown},
		{"ListNewestFirstWithFilterAndCursor", testListNewestFirst},
		{"ListByKindWithLimits", testListByKind},
		{"ListByReport", testListByReport},
		{"ListByCreator", testListByCreator},
		{"UnfinishedAndJobsByID", testUnfinishedAndJobsByID},
		{"PendingByQueue", testPendingByQueue},
		{"PendingHeadInClaimOrder", testPendingHead},
		{"QueueStats", testQueueStats},
		{"StalledJobs", testStalledJobs},
		{"ThroughputAndDurations", testThroughputAndDurations},
		{"PercentilesNearestRank", testPercentilesNearestRank},
		{"NowIsTheStampClock", testNowIsTheStampClock},
		{"PingAndProbeWrite", testPingAndProbeWrite},
		{"BatchStatsAddUp", testBatchStatsAddUp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := open(t, Options{})
			c.fn(t, h, reads(t, h))
		})
	}
	t.Run("CountsLeaveOutFollowUps", func(t *testing.T) { testCountsLeaveOutFollowUps(t, open) })
}

func reads(t *testing.T, h Harness) *store.Store {
	t.Helper()
	return h.Store
}

func ofKind(kind string) func(*store.NewJob) { return func(nj *store.NewJob) { nj.Kind = kind } }

func list(t *testing.T, r *store.Store, o store.ListOptions) []string {
	t.Helper()
	js, err := r.List(ctx, o)
	if err != nil {
		t.Fatalf("list %+v: %v", o, err)
	}
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// pageThrough lists every job o matches, limit at a time, each page after the last job
// of the one before.
func pageThrough(t *testing.T, r *store.Store, o store.ListOptions) []string {
	t.Helper()
	var all []string
	for range 100 {
		page, err := r.List(ctx, o)
		if err != nil {
			t.Fatalf("list %+v: %v", o, err)
		}
		if len(page) > o.Limit {
			t.Fatalf("page of %d with limit %d", len(page), o.Limit)
		}
		if len(page) == 0 {
			return all
		}
		for _, j := range page {
			all = append(all, j.ID)
		}
		o.Before = page[len(page)-1].Seq
	}
	t.Fatalf("paging %+v never ended", o)
	return nil
}

func testGetUnknown(t *testing.T, h Harness, r *store.Store) {
	if _, err := r.Get(ctx, "no-such-job"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of an unknown job: err = %v, want ErrNotFound", err)
	}
	// An id or a filter with a NUL (a client's "%00") matches nothing, as any unknown
	// value does; PostgreSQL's text cannot hold one, and refuses it as a parameter.
	enqueue(t, h)
	nul := "no-such\x00job"
	if _, err := r.Get(ctx, nul); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get of an id with a NUL: err = %v, want ErrNotFound", err)
	}
	for name, call := range map[string]func() (store.Job, error){
		"Cancel": func() (store.Job, error) { return h.Store.Cancel(ctx, nul) },
		"Retry":  func() (store.Job, error) { return h.Store.Retry(ctx, nul, 0) },
		"Delete": func() (store.Job, error) { return h.Store.Delete(ctx, nul) },
	} {
		if _, err := call(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of an id with a NUL: err = %v, want ErrNotFound", name, err)
		}
	}
	if evs, err := h.Store.Events(ctx, nul); err != nil || len(evs) != 0 {
		t.Errorf("events of an id with a NUL: %d, %v; want none", len(evs), err)
	}
	for _, o := range []store.ListOptions{{Report: nul}, {Kind: nul}} {
		if js, err := r.List(ctx, o); err != nil || len(js) != 0 {
			t.Errorf("List(%+v): %d jobs, %v; want none", o, len(js), err)
		}
	}
}

// List is newest first by insertion order, also for jobs stamped at the same instant; a
// state filter and the cursor (Job.Seq) combine, and paging neither skips nor repeats.
func testListNewestFirst(t *testing.T, h Harness, r *store.Store) {
	var all []string // oldest first
	for i := range 7 {
		j := enqueue(t, h)
		all = append(all, j.ID)
		if i%3 == 0 {
			if _, err := h.Store.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		h.Advance(time.Second)
	}
	// Three more at the same instant: the order and the cursor must not depend on time.
	for range 3 {
		all = append(all, enqueue(t, h).ID)
	}
	claimID(t, h, all[1]) // the oldest PENDING job: PROCESSING
	failed := claimID(t, h, all[2])
	if _, err := fail(h.Store, failed.ID, 1, store.AttemptError{Code: "x", Message: "x", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	if got := list(t, r, store.ListOptions{}); !slices.Equal(got, newest) {
		t.Fatalf("list = %v\nwant   %v", got, newest)
	}
	if got, want := list(t, r, store.ListOptions{Status: store.StatusCanceled}), []string{all[6], all[3], all[0]}; !slices.Equal(got, want) {
		t.Fatalf("canceled = %v, want %v", got, want)
	}
	for _, status := range []store.Status{"", store.StatusPending, store.StatusProcessing, store.StatusCanceled, store.StatusFailed, store.StatusSucceeded} {
		want := slices.DeleteFunc(slices.Clone(newest), func(id string) bool {
			return status != "" && get(t, h, id).Status != status
		})
		if got := pageThrough(t, r, store.ListOptions{Limit: 2, Status: status}); !slices.Equal(got, want) {
			t.Fatalf("paging status %q = %v\nwant %v", status, got, want)
		}
	}
}

// The kind filter keeps one kind; the limit is 50 when not set; a status that is no state
// lists nothing.
func testListByKind(t *testing.T, h Harness, r *store.Store) {
	var reports []string // newest first
	for i := range 51 {
		kind := "report"
		if i%10 == 0 {
			kind = "webhook"
		}
		j := enqueue(t, h, ofKind(kind))
		if kind == "report" {
			reports = slices.Insert(reports, 0, j.ID)
		}
	}
	if got := list(t, r, store.ListOptions{Kind: "report", Limit: 1000}); !slices.Equal(got, reports) {
		t.Fatalf("kind report = %v\nwant %v", got, reports)
	}
	if got := list(t, r, store.ListOptions{}); len(got) != 50 {
		t.Fatalf("list without a limit returned %d of 51 jobs, want 50", len(got))
	}
	if got := list(t, r, store.ListOptions{Kind: "report", Limit: 3}); !slices.Equal(got, reports[:3]) {
		t.Fatalf("limit 3 = %v, want %v", got, reports[:3])
	}
	if got := list(t, r, store.ListOptions{Status: "BOGUS"}); len(got) != 0 {
		t.Fatalf("status BOGUS lists %v", got)
	}
	if got := list(t, r, store.ListOptions{Kind: "nosuch"}); len(got) != 0 {
		t.Fatalf("kind nosuch lists %v", got)
	}
}

// The report filter ($.report of the args) combines with the states, finished and not,
// and with the cursor.
func testListByReport(t *testing.T, h Harness, r *store.Store) {
	var demo []string // newest first
	for i := range 6 {
		report := "demo"
		if i%2 == 1 {
			report = "orders"
		}
		j := enqueue(t, h, func(nj *store.NewJob) { nj.Args = json.RawMessage(`{"report":"` + report + `","params":{}}`) })
		if report == "demo" {
			demo = slices.Insert(demo, 0, j.ID)
		}
		h.Advance(time.Second)
	}
	enqueue(t, h, func(nj *store.NewJob) { nj.Args = json.RawMessage(`{"other":"demo"}`) }) // no report at all
	// demo[0] CANCELED, demo[1] PENDING, demo[2] (the oldest job) PROCESSING.
	if _, err := h.Store.Cancel(ctx, demo[0]); err != nil {
		t.Fatal(err)
	}
	claimID(t, h, demo[2])

	if got := list(t, r, store.ListOptions{Report: "demo"}); !slices.Equal(got, demo) {
		t.Errorf("report demo = %v, want %v", got, demo)
	}
	if got := list(t, r, store.ListOptions{Report: "demo", Kind: "test"}); !slices.Equal(got, demo) {
		t.Errorf("report demo, kind test = %v, want %v", got, demo)
	}
	for i, st := range []store.Status{store.StatusCanceled, store.StatusPending, store.StatusProcessing} {
		if got := list(t, r, store.ListOptions{Report: "demo", Status: st}); !slices.Equal(got, demo[i:i+1]) {
			t.Errorf("report demo, %s = %v, want %v", st, got, demo[i:i+1])
		}
	}
	if got := list(t, r, store.ListOptions{Report: "demo", Status: store.StatusFailed}); len(got) != 0 {
		t.Errorf("report demo, FAILED = %v, want none", got)
	}
	if got := pageThrough(t, r, store.ListOptions{Report: "demo", Limit: 1}); !slices.Equal(got, demo) {
		t.Errorf("report demo a job at a time = %v, want %v", got, demo)
	}
	if got := list(t, r, store.ListOptions{Report: "nosuch"}); len(got) != 0 {
		t.Errorf("unknown report lists %v", got)
	}
	if got := list(t, r, store.ListOptions{Report: "demo", Kind: "other"}); len(got) != 0 {
		t.Errorf("report demo of another kind lists %v", got)
	}
}

// Unfinished lists only PENDING and PROCESSING jobs, oldest first; JobsByID finds the
// jobs that exist and skips the rest.
func testUnfinishedAndJobsByID(t *testing.T, h Harness, r *store.Store) {
	var ids []string
	for range 4 {
		ids = append(ids, enqueue(t, h).ID)
		h.Advance(time.Millisecond)
	}
	claimID(t, h, ids[0])
	if _, err := h.Store.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	un, err := r.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range un {
		got = append(got, j.ID)
	}
	if want := []string{ids[0], ids[2], ids[3]}; !slices.Equal(got, want) {
		t.Fatalf("unfinished %v, want %v", got, want)
	}

	m, err := r.JobsByID(ctx, []string{ids[1], ids[3], "nope", ids[1]})
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[ids[1]].Status != store.StatusCanceled || m[ids[3]].Status != store.StatusPending {
		t.Fatalf("JobsByID: %+v", m)
	}
	if want := get(t, h, ids[3]); !reflect.DeepEqual(m[ids[3]], want) {
		t.Fatalf("JobsByID's job = %+v\nGet's = %+v", m[ids[3]], want)
	}
	if m, err := r.JobsByID(ctx, nil); err != nil || len(m) != 0 {
		t.Fatalf("JobsByID(nil) = %v, %v", m, err)
	}
}

// PendingByQueue counts each queue's PENDING jobs, runnable or not; a queue without
// one is absent.
func testPendingByQueue(t *testing.T, h Harness, r *store.Store) {
	if m, err := r.PendingByQueue(ctx); err != nil || len(m) != 0 {
		t.Fatalf("empty store: %v, %v", m, err)
	}
	a := enqueue(t, h)
	enqueue(t, h)
	enqueue(t, h, inQueue("webhooks"), func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Hour) })
	enqueue(t, h, inQueue("idle"))
	claimID(t, h, a.ID)
	if j, err := claimOne(h.Store, "w1", "idle"); err != nil {
		t.Fatalf("claim from idle: %s, %v", j.ID, err)
	}
	m, err := r.PendingByQueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{store.DefaultQueue: 1, "webhooks": 1}; !maps.Equal(m, want) {
		t.Fatalf("pending by queue = %v, want %v", m, want)
	}
}

// PendingHead lists a queue's PENDING jobs of one kind as claims would take them:
// priority first, then run_at (a job waiting out a backoff after those due before it),
// then insertion; other queues, other kinds and jobs no longer PENDING are left out.
func testPendingHead(t *testing.T, h Harness, r *store.Store) {
	kind := func(k string) func(*store.NewJob) { return func(nj *store.NewJob) { nj.Kind = k } }
	prio := func(p int) func(*store.NewJob) { return func(nj *store.NewJob) { nj.Priority = p } }
	at := func(d time.Duration) func(*store.NewJob) { return func(nj *store.NewJob) { nj.RunAt = h.Now().Add(d) } }
	first := enqueue(t, h)
	later := enqueue(t, h, at(time.Hour))
	second := enqueue(t, h)
	urgent := enqueue(t, h, prio(-1))
	enqueue(t, h, kind("other"))
	enqueue(t, h, inQueue("webhooks"))
	claimed := enqueue(t, h, prio(-2))
	claimID(t, h, claimed.ID)
	ids := func(jobs []store.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	got, err := r.PendingHead(ctx, store.DefaultQueue, "test", 10)
	if want := []string{urgent.ID, first.ID, second.ID, later.ID}; err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("pending head = %v, %v; want %v", ids(got), err, want)
	}
	if got, err := r.PendingHead(ctx, store.DefaultQueue, "test", 2); err != nil || !slices.Equal(ids(got), []string{urgent.ID, first.ID}) {
		t.Fatalf("pending head, limit 2 = %v, %v", ids(got), err)
	}
	if got, err := r.PendingHead(ctx, "none", "test", 10); err != nil || len(got) != 0 {
		t.Fatalf("pending head of an empty queue = %v, %v", ids(got), err)
	}
}

// Counts counts the jobs in each state, leaving out follow-ups; a state without jobs
// is absent.
func testCountsLeaveOutFollowUps(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	h := open(t, Options{FollowUps: hook.fn})
	r := reads(t, h)
	if m, err := r.Counts(ctx); err != nil || len(m) != 0 {
		t.Fatalf("empty store: %v, %v", m, err)
	}
	j := enqueue(t, h, notifying)
	claimID(t, h, j.ID)
	if _, err := succeed(h.Store, j.ID, 1, file, nil); err != nil {
		t.Fatal(err)
	}
	if f := get(t, h, hook.of(j.ID)); f.Status != store.StatusPending {
		t.Fatalf("follow-up is %s, want PENDING", f.Status)
	}
	enqueue(t, h)
	c, err := h.Store.Cancel(ctx, enqueue(t, h).ID)
	if err != nil || c.Status != store.StatusCanceled {
		t.Fatalf("cancel: %v, %v", c.Status, err)
	}
	m, err := r.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[store.Status]int{store.StatusSucceeded: 1, store.StatusPending: 1, store.StatusCanceled: 1}
	if !maps.Equal(m, want) {
		t.Fatalf("counts = %v, want %v (the PENDING follow-up left out)", m, want)
	}
}

func testQueueStats(t *testing.T, h Harness, r *store.Store) {
	t0 := h.Now()
	a := enqueue(t, h, ofKind("report"))
	enqueue(t, h, ofKind("report"))
	enqueue(t, h, ofKind("report"), func(nj *store.NewJob) { nj.RunAt = t0.Add(time.Hour) }) // not runnable yet
	enqueue(t, h, ofKind("other"))
	h.Advance(10 * time.Second)
	claimID(t, h, a.ID)
	h.Advance(5 * time.Second)
	now := h.Now()

	qs, err := r.QueueStats(ctx, now, now.Add(-2*time.Second), "report", "none")
	if err != nil {
		t.Fatal(err)
	}
	zero := map[store.Status]int{}
	for _, s := range store.AllStatuses {
		zero[s] = 0
	}
	counts := func(pending, processing int) map[store.Status]int {
		m := maps.Clone(zero)
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
	if _, err := h.Store.Heartbeat(ctx, a.ID, 1, 0, -1); err != nil {
		t.Fatal(err)
	}
	qs, err = r.QueueStats(ctx, t0.Add(-time.Minute), now.Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rs := qs["report"]; rs.LateHeartbeats != 0 || !rs.OldestPendingRunAt.IsZero() {
		t.Fatalf("report stats = %+v, want no late heartbeat and no runnable pending job", rs)
	}
	if _, ok := qs["none"]; ok {
		t.Fatal("a kind neither asked for nor stored is reported")
	}
}

func testStalledJobs(t *testing.T, h Harness, r *store.Store) {
	silent := enqueue(t, h, ofKind("report"))
	noRows := enqueue(t, h, ofKind("report"))
	busy := enqueue(t, h, ofKind("report"))
	other := enqueue(t, h, ofKind("other"))
	for range 4 {
		claim(t, h)
	}
	h.Advance(10 * time.Minute)
	for _, hb := range []struct {
		id   string
		rows int64
	}{{noRows.ID, 0}, {busy.ID, 5}} {
		if _, err := h.Store.Heartbeat(ctx, hb.id, 1, hb.rows, -1); err != nil {
			t.Fatal(err)
		}
	}
	now := h.Now()
	got, total, err := r.StalledJobs(ctx, "report", now.Add(-time.Minute), now.Add(-5*time.Minute), 10)
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
	got, total, err = r.StalledJobs(ctx, "report", now.Add(-time.Minute), now.Add(-5*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || len(got) != 1 || got[0].Job.ID != silent.ID {
		t.Fatalf("limit 1: %d listed of %d, want the silent job of 2", len(got), total)
	}
}

// Jobs with known timings an hour and more apart: the buckets and nearest-rank
// percentiles of each window.
func testThroughputAndDurations(t *testing.T, h Harness, r *store.Store) {
	// Start on a 5-minute boundary; t0, two hours later, is one too.
	h.Advance(h.Now().Truncate(5 * time.Minute).Add(5 * time.Minute).Sub(h.Now()))
	t0 := h.Now().Add(2 * time.Hour)
	ok := func(j store.Job) {
		t.Helper()
		if _, err := succeed(h.Store, j.ID, j.Attempt, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Two hours ago: waited 1 s, ran 1 s.
	enqueue(t, h, ofKind("report"))
	h.Advance(time.Second)
	first := claim(t, h)
	h.Advance(time.Second)
	ok(first)

	h.Advance(t0.Sub(h.Now()))
	enqueue(t, h, ofKind("report")) // waits 2 s, runs 3 s, succeeds
	enqueue(t, h, ofKind("report")) // waits 4 s, runs 6 s, fails
	canceled := enqueue(t, h, ofKind("report"))
	enqueue(t, h, ofKind("other"))
	h.Advance(2 * time.Second)
	good := claim(t, h)
	h.Advance(2 * time.Second)
	bad := claim(t, h)
	h.Advance(time.Second)
	ok(good)
	h.Advance(5 * time.Second)
	if _, err := fail(h.Store, bad.ID, bad.Attempt, store.AttemptError{Code: "bad", Message: "bad", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}
	ok(claim(t, h)) // the other kind's job: counted nowhere below
	now := h.Now()

	hour, err := r.Throughput(ctx, "report", now, 5*time.Minute, 12)
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
	day, err := r.Throughput(ctx, "report", now, time.Hour, 24)
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
	if _, err := r.Throughput(ctx, "report", now, 0, 12); err == nil {
		t.Error("a zero bucket width is accepted")
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
		ds, err := r.Durations(ctx, "report", tc.since)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Wait != tc.wait || ds.Run != tc.run {
			t.Errorf("%s: wait %+v run %+v, want wait %+v run %+v", tc.name, ds.Wait, ds.Run, tc.wait, tc.run)
		}
	}
}

// Of waits of 1..20 s, the 50th percentile is the 10th value and the 95th the 19th.
func testPercentilesNearestRank(t *testing.T, h Harness, r *store.Store) {
	since := h.Now()
	for i := 20; i >= 1; i-- {
		j := enqueue(t, h, ofKind("report"))
		h.Advance(time.Duration(i) * time.Second)
		claimID(t, h, j.ID)
		if _, err := succeed(h.Store, j.ID, 1, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := r.Durations(ctx, "report", since)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Percentiles{Count: 20, P50: 10 * time.Second, P95: 19 * time.Second}); ds.Wait != want {
		t.Fatalf("wait = %+v, want %+v", ds.Wait, want)
	}
}

// Now reads the clock the store stamps rows with.
func testNowIsTheStampClock(t *testing.T, h Harness, r *store.Store) {
	if !r.Now().Equal(h.Now()) {
		t.Fatalf("Now = %v, the harness's clock %v", r.Now(), h.Now())
	}
	j := enqueue(t, h)
	if !j.CreatedAt.Equal(r.Now()) {
		t.Fatalf("created at %v, Now %v", j.CreatedAt, r.Now())
	}
	h.Advance(time.Minute)
	if d := r.Now().Sub(j.CreatedAt); d != time.Minute {
		t.Fatalf("Now moved %v with the clock, want 1m", d)
	}
}

// A live store answers a ping and takes a probe write, again and again; a ping whose
// context has ended fails.
func testPingAndProbeWrite(t *testing.T, h Harness, r *store.Store) {
	for range 3 {
		if err := r.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if err := r.ProbeWrite(ctx); err != nil {
			t.Fatalf("probe write: %v", err)
		}
		h.Advance(time.Second)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Ping(done); err == nil {
		t.Fatal("ping with an ended context succeeded")
	}
}

// Every Enqueue call is carried by one group commit (a store without group commit
// reports none), a commit carries at least one call, and nothing waits when all
// calls have returned.
func testBatchStatsAddUp(t *testing.T, h Harness, r *store.Store) {
	base := r.BatchStats()
	const n = 3
	for range n {
		enqueue(t, h)
	}
	s := r.BatchStats()
	calls, commits := s.Calls-base.Calls, s.Commits-base.Commits
	if s.Waiting != 0 || !(calls == n && commits >= 1 && commits <= n || calls == 0 && commits == 0) {
		t.Fatalf("after %d enqueues: %+v (from %+v)", n, s, base)
	}
}

// The creator filter (a member's own exports) keeps the jobs whose CreatedBy equals it,
// finished and not, and combines with the states, the report and the cursor; a job made
// without a creator is nobody's.
func testListByCreator(t *testing.T, h Harness, r *store.Store) {
	var ann, annDemo []string // newest first
	for i := range 9 {
		by := []string{"ann", "bob", ""}[i%3]
		report := []string{"demo", "orders"}[i%2]
		j := enqueue(t, h, func(nj *store.NewJob) {
			nj.CreatedBy = by
			nj.Args = json.RawMessage(`{"report":"` + report + `","params":{}}`)
		})
		if by == "ann" {
			ann = slices.Insert(ann, 0, j.ID)
			if report == "demo" {
				annDemo = slices.Insert(annDemo, 0, j.ID)
			}
		}
		h.Advance(time.Second)
	}
	// ann's jobs, oldest first: 0 (demo), 3 (orders), 6 (demo). 0 PROCESSING, 3 CANCELED,
	// 6 PENDING; everyone's oldest is ann's 0, so the claim takes it.
	claimID(t, h, ann[2])
	if _, err := h.Store.Cancel(ctx, ann[1]); err != nil {
		t.Fatal(err)
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "ann"}); !slices.Equal(got, ann) {
		t.Errorf("created by ann = %v, want %v", got, ann)
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "ann", Kind: "test"}); !slices.Equal(got, ann) {
		t.Errorf("created by ann, kind test = %v, want %v", got, ann)
	}
	for i, st := range []store.Status{store.StatusPending, store.StatusCanceled, store.StatusProcessing} {
		if got := list(t, r, store.ListOptions{CreatedBy: "ann", Status: st}); !slices.Equal(got, ann[i:i+1]) {
			t.Errorf("created by ann, %s = %v, want %v", st, got, ann[i:i+1])
		}
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "ann", Status: store.StatusFailed}); len(got) != 0 {
		t.Errorf("created by ann, FAILED = %v, want none", got)
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "ann", Report: "demo"}); !slices.Equal(got, annDemo) {
		t.Errorf("created by ann, report demo = %v, want %v", got, annDemo)
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "ann", Report: "demo", Status: store.StatusPending}); !slices.Equal(got, annDemo[:1]) {
		t.Errorf("created by ann, report demo, PENDING = %v, want %v", got, annDemo[:1])
	}
	if got := pageThrough(t, r, store.ListOptions{CreatedBy: "ann", Limit: 1}); !slices.Equal(got, ann) {
		t.Errorf("created by ann a job at a time = %v, want %v", got, ann)
	}
	if got := pageThrough(t, r, store.ListOptions{CreatedBy: "ann", Report: "demo", Limit: 1}); !slices.Equal(got, annDemo) {
		t.Errorf("created by ann, report demo, a job at a time = %v, want %v", got, annDemo)
	}
	newest := get(t, h, ann[0])
	if got := list(t, r, store.ListOptions{CreatedBy: "ann", Before: newest.Seq}); !slices.Equal(got, ann[1:]) {
		t.Errorf("created by ann before %s = %v, want %v", ann[0], got, ann[1:])
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "nobody"}); len(got) != 0 {
		t.Errorf("created by nobody lists %v", got)
	}
	if got := list(t, r, store.ListOptions{CreatedBy: "no\x00body"}); len(got) != 0 {
		t.Errorf("created by a name with a NUL lists %v", got)
	}
}
