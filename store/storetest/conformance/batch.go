package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// The engine claims and ends attempts in batches (rule 28): the suite states the single
// rules through batches of one, and the cases below what a batch adds.

func claimOne(st *store.Store, worker, queue string) (store.Job, error) {
	jobs, err := st.ClaimBatch(ctx, worker, queue, 1)
	switch {
	case err != nil:
		return store.Job{}, err
	case len(jobs) == 0:
		return store.Job{}, store.ErrNotFound
	case len(jobs) > 1:
		return store.Job{}, fmt.Errorf("claim with limit 1 took %d jobs", len(jobs))
	}
	return jobs[0], nil
}

func finishOne(st *store.Store, f store.Finish) (store.Job, error) {
	res := st.FinishBatch(ctx, []store.Finish{f})
	if len(res) != 1 {
		return store.Job{}, fmt.Errorf("FinishBatch of one answered %d", len(res))
	}
	return res[0].Job, res[0].Err
}

func succeed(st *store.Store, id string, attempt int, res store.FileResult, publish func() error) (store.Job, error) {
	return finishOne(st, store.Finish{ID: id, Attempt: attempt, Outcome: store.Succeeded, Result: res, Publish: publish})
}

func fail(st *store.Store, id string, attempt int, e store.AttemptError, retryIn time.Duration) (store.Job, error) {
	return finishOne(st, store.Finish{ID: id, Attempt: attempt, Outcome: store.Failed, Error: e, RetryIn: retryIn})
}

func requeue(st *store.Store, id string, attempt int, reason string) (store.Job, error) {
	return finishOne(st, store.Finish{ID: id, Attempt: attempt, Outcome: store.Requeued, Reason: reason})
}

func finishCanceled(st *store.Store, id string, attempt int) (store.Job, error) {
	return finishOne(st, store.Finish{ID: id, Attempt: attempt, Outcome: store.Canceled})
}

// A batch claim takes the runnable jobs of its queue in claim order, up to its limit,
// each with its own attempt and "started" event, and leaves the rest PENDING.
func testClaimBatchOrderAndLimit(t *testing.T, h Harness) {
	late := enqueue(t, h, func(nj *store.NewJob) { nj.Priority = 5 })
	var first []string
	for range 3 {
		first = append(first, enqueue(t, h).ID)
	}
	delayed := enqueue(t, h, func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Hour) })
	other := enqueue(t, h, func(nj *store.NewJob) { nj.Queue = "other" })

	got, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 2)
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	if ids := jobIDs(got); !slices.Equal(ids, first[:2]) {
		t.Fatalf("claimed %v, want %v (claim order, at most the limit)", ids, first[:2])
	}
	for _, j := range got {
		if j.Status != store.StatusProcessing || j.Attempt != 1 || j.Worker != "w1" {
			t.Fatalf("claimed %s: status %s attempt %d worker %q", j.ID, j.Status, j.Attempt, j.Worker)
		}
		if typs := types(events(t, h, j.ID)); !slices.Equal(typs, []string{store.EventAccepted, store.EventStarted}) {
			t.Fatalf("events of %s: %v", j.ID, typs)
		}
	}
	// More room than runnable jobs: the rest of the queue, and nothing delayed or foreign.
	got, err = h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 10)
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	if ids := jobIDs(got); !slices.Equal(ids, []string{first[2], late.ID}) {
		t.Fatalf("claimed %v, want %v", ids, []string{first[2], late.ID})
	}
	got, err = h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("claim batch of an empty queue = %v, %v; want none and no error", jobIDs(got), err)
	}
	for _, id := range []string{delayed.ID, other.ID} {
		if j := get(t, h, id); j.Status != store.StatusPending {
			t.Fatalf("%s is %s, want PENDING", id, j.Status)
		}
	}
	if _, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 0); err == nil {
		t.Fatal("a claim with limit 0 was taken")
	}
}

// Batch claims that race never take one job twice, and together take each once.
func testClaimBatchIsAtomic(t *testing.T, h Harness) {
	const n, claimers = 60, 4
	for range n {
		enqueue(t, h)
	}
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		errs []error
		wg   sync.WaitGroup
	)
	for c := range claimers {
		worker := fmt.Sprintf("w%d", c)
		wg.Go(func() {
			for {
				got, err := h.Store.ClaimBatch(ctx, worker, store.DefaultQueue, 3)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, j := range got {
					if prev, ok := seen[j.ID]; ok {
						errs = append(errs, fmt.Errorf("%s claimed by %s and %s", j.ID, prev, worker))
					}
					seen[j.ID] = worker
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
	}
}

// One batch of ends: each is recorded as its own method would, and one that fails (a
// stale attempt, a failed publish) is answered alone while the others commit. A stale
// attempt's publish never runs.
func testFinishBatchIsolatesEachEnd(t *testing.T, h Harness) {
	var ids []string
	for range 6 {
		ids = append(ids, enqueue(t, h, func(nj *store.NewJob) { nj.MaxAttempts = 3 }).ID)
	}
	got, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 6)
	if err != nil || len(got) != 6 {
		t.Fatalf("claim batch = %d jobs, %v", len(got), err)
	}
	byID := map[string]store.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	ok, stale, badPublish, failed, canceled, requeued := byID[ids[0]], byID[ids[1]], byID[ids[2]], byID[ids[3]], byID[ids[4]], byID[ids[5]]
	if _, err := h.Store.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}

	published := map[string]int{}
	publish := func(id string, err error) func() error {
		return func() error { published[id]++; return err }
	}
	boom := errors.New("rename: disk full")
	res := h.Store.FinishBatch(ctx, []store.Finish{
		{ID: ok.ID, Attempt: ok.Attempt, Outcome: store.Succeeded, Result: store.FileResult{Name: "ok.xlsx", Rows: 3}, Publish: publish(ok.ID, nil)},
		{ID: stale.ID, Attempt: stale.Attempt - 1, Outcome: store.Succeeded, Result: store.FileResult{Name: "stale.xlsx"}, Publish: publish(stale.ID, nil)},
		{ID: badPublish.ID, Attempt: badPublish.Attempt, Outcome: store.Succeeded, Result: store.FileResult{Name: "bad.xlsx"}, Publish: publish(badPublish.ID, boom)},
		{ID: failed.ID, Attempt: failed.Attempt, Outcome: store.Failed, Error: store.AttemptError{Code: "upstream", Message: "502"}, RetryIn: time.Minute},
		{ID: canceled.ID, Attempt: canceled.Attempt, Outcome: store.Canceled},
		{ID: requeued.ID, Attempt: requeued.Attempt, Outcome: store.Requeued, Reason: "shutdown"},
	})
	if len(res) != 6 {
		t.Fatalf("FinishBatch answered %d ends, want 6", len(res))
	}
	if published[stale.ID] != 0 {
		t.Fatal("a stale attempt's publish ran (rule 3)")
	}
	if published[ok.ID] != 1 || published[badPublish.ID] != 1 {
		t.Fatalf("publish calls: %v", published)
	}
	for i, want := range []error{nil, store.ErrLeaseLost, boom, nil, nil, nil} {
		if (want == nil) != (res[i].Err == nil) || (want != nil && !errors.Is(res[i].Err, want)) {
			t.Errorf("end %d (%s): err %v, want %v", i, ids[i], res[i].Err, want)
		}
	}
	for id, want := range map[string]store.Status{
		ok.ID: store.StatusSucceeded, stale.ID: store.StatusProcessing, badPublish.ID: store.StatusProcessing,
		failed.ID: store.StatusPending, canceled.ID: store.StatusCanceled, requeued.ID: store.StatusPending,
	} {
		if j := get(t, h, id); j.Status != want {
			t.Errorf("%s is %s, want %s", id, j.Status, want)
		}
	}
	if res[0].Job.Status != store.StatusSucceeded || res[0].Job.FileName != "ok.xlsx" || res[0].Job.ProgressRows != 3 {
		t.Errorf("succeeded end answered %+v", res[0].Job)
	}
	if j := get(t, h, failed.ID); j.Attempt != 1 || j.ErrorCode != "upstream" {
		t.Errorf("failed end: attempt %d code %q", j.Attempt, j.ErrorCode)
	}
	if j := get(t, h, requeued.ID); j.Attempt != 0 {
		t.Errorf("requeued end spent its attempt: attempt %d", j.Attempt)
	}
	// The ends that failed left nothing behind: no event, and their attempts still own
	// their jobs, so they can end again.
	for _, id := range []string{stale.ID, badPublish.ID} {
		if typs := types(events(t, h, id)); !slices.Equal(typs, []string{store.EventAccepted, store.EventStarted}) {
			t.Errorf("events of %s after its end failed: %v", id, typs)
		}
	}
	if _, err := succeed(h.Store, badPublish.ID, badPublish.Attempt, store.FileResult{Name: "bad.xlsx"}, nil); err != nil {
		t.Errorf("a second try of the end whose publish failed: %v", err)
	}
	if typs := types(events(t, h, ok.ID)); !slices.Equal(typs, []string{store.EventAccepted, store.EventStarted, store.EventSucceeded}) {
		t.Errorf("events of %s: %v", ok.ID, typs)
	}
	if got := h.Store.FinishBatch(ctx, nil); len(got) != 0 {
		t.Errorf("an empty batch answered %d ends", len(got))
	}
}

// A batch of successes with nothing to publish (files already in a bucket, under keys of
// their own), as a store may send them together: each fenced alone, a stale attempt
// refused without an event, the others recorded with their event and file.
func testFinishBatchWithoutPublish(t *testing.T, h Harness) {
	var ids []string
	for range 4 {
		ids = append(ids, enqueue(t, h, func(nj *store.NewJob) { nj.MaxAttempts = 3 }).ID)
	}
	got, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 4)
	if err != nil || len(got) != 4 {
		t.Fatalf("claim batch = %d jobs, %v", len(got), err)
	}
	byID := map[string]store.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	a, stale, b, failed := byID[ids[0]], byID[ids[1]], byID[ids[2]], byID[ids[3]]
	file := func(name string) store.FileResult {
		return store.FileResult{Name: name, Size: 10, SHA256: "ab", Rows: 2, Warnings: []string{"w"}}
	}
	res := h.Store.FinishBatch(ctx, []store.Finish{
		{ID: a.ID, Attempt: a.Attempt, Outcome: store.Succeeded, Result: file("exports/a/1.xlsx")},
		{ID: stale.ID, Attempt: stale.Attempt + 1, Outcome: store.Succeeded, Result: file("exports/s/2.xlsx")},
		{ID: failed.ID, Attempt: failed.Attempt, Outcome: store.Failed, Error: store.AttemptError{Code: "x", Message: "x", Permanent: true}},
		{ID: b.ID, Attempt: b.Attempt, Outcome: store.Succeeded, Result: file("exports/b/1.xlsx")},
	})
	for i, want := range []error{nil, store.ErrLeaseLost, nil, nil} {
		if (want == nil) != (res[i].Err == nil) || (want != nil && !errors.Is(res[i].Err, want)) {
			t.Errorf("end %d: err %v, want %v", i, res[i].Err, want)
		}
	}
	for i, j := range []store.Job{a, b} {
		name := []string{"exports/a/1.xlsx", "exports/b/1.xlsx"}[i]
		got := get(t, h, j.ID)
		if got.Status != store.StatusSucceeded || got.FileName != name || got.FileSize != 10 || got.FileSHA256 != "ab" ||
			got.ProgressRows != 2 || !slices.Equal(got.Warnings, []string{"w"}) {
			t.Errorf("%s after its end: %+v", j.ID, got)
		}
		if typs := types(events(t, h, j.ID)); !slices.Equal(typs, []string{store.EventAccepted, store.EventStarted, store.EventSucceeded}) {
			t.Errorf("events of %s: %v", j.ID, typs)
		}
	}
	if j := get(t, h, stale.ID); j.Status != store.StatusProcessing || j.Attempt != stale.Attempt {
		t.Errorf("the stale end changed its job: %s attempt %d", j.Status, j.Attempt)
	}
	if typs := types(events(t, h, stale.ID)); !slices.Equal(typs, []string{store.EventAccepted, store.EventStarted}) {
		t.Errorf("events of the stale end's job: %v", typs)
	}
	if j := get(t, h, failed.ID); j.Status != store.StatusFailed {
		t.Errorf("the failed end's job is %s", j.Status)
	}
}

// Two ends of one attempt in one batch: the first commits, the second finds the job no
// longer PROCESSING and is refused by its fence.
func testFinishBatchSameAttemptTwice(t *testing.T, h Harness) {
	enqueue(t, h)
	j := claim(t, h)
	res := h.Store.FinishBatch(ctx, []store.Finish{
		{ID: j.ID, Attempt: j.Attempt, Outcome: store.Succeeded},
		{ID: j.ID, Attempt: j.Attempt, Outcome: store.Failed, Error: store.AttemptError{Code: "x"}},
	})
	if res[0].Err != nil || !errors.Is(res[1].Err, store.ErrLeaseLost) {
		t.Fatalf("ends = %v, %v; want nil, ErrLeaseLost", res[0].Err, res[1].Err)
	}
	if got := get(t, h, j.ID); got.Status != store.StatusSucceeded {
		t.Fatalf("job is %s, want SUCCEEDED", got.Status)
	}
}

func jobIDs(js []store.Job) []string {
	ids := make([]string, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}
