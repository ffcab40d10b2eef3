package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// RunAudit runs the cases of the audit log and the people seen (issue 39), each on a
// store of its own from open (the same open as Run's).
func RunAudit(t *testing.T, open func(t *testing.T, o Options) Harness) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"AuditAppendsAndReadsBack", testAuditAppends},
		{"AuditNewestFirstWithFiltersAndCursor", testAuditFilters},
		{"AuditLimits", testAuditLimits},
		{"AuditRefusals", testAuditRefusals},
		{"AuditPruneOldestFirst", testAuditPrune},
		{"AuditConcurrentPrunesRemoveEachOnce", testAuditConcurrentPrunes},
		{"AuditIsDurable", testAuditIsDurable},
		{"PeopleSeen", testPeopleSeen},
		{"EnqueueWritesItsAuditEntry", testEnqueueAudit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t, Options{})) })
	}
}

func audit(t *testing.T, h Harness, e store.AuditEntry) store.AuditEntry {
	t.Helper()
	out, err := h.Store.Audit(ctx, e)
	if err != nil {
		t.Fatalf("audit %+v: %v", e, err)
	}
	return out
}

func auditSeqs(t *testing.T, h Harness, f store.AuditFilter) []int64 {
	t.Helper()
	es, err := h.Store.AuditLog(ctx, f)
	if err != nil {
		t.Fatalf("audit log %+v: %v", f, err)
	}
	out := []int64{}
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// pageAudit reads every entry f selects, f.Limit at a time, each page before the last
// entry of the one before.
func pageAudit(t *testing.T, h Harness, f store.AuditFilter) []int64 {
	t.Helper()
	all := []int64{}
	for range 1000 {
		page := auditSeqs(t, h, f)
		if len(page) > f.Limit {
			t.Fatalf("page of %d with limit %d", len(page), f.Limit)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		f.Before = page[len(page)-1]
	}
	t.Fatalf("paging %+v never ended", f)
	return nil
}

// An entry reads back as it was given, with a Seq that grows, stamped by the store's
// clock when it has no time and with its own time when it has one.
func testAuditAppends(t *testing.T, h Harness) {
	if es, err := h.Store.AuditLog(ctx, store.AuditFilter{}); err != nil || len(es) != 0 {
		t.Fatalf("empty log: %v, %v; want none", es, err)
	}
	first := audit(t, h, store.AuditEntry{Actor: "ann@example.com", Action: "export_requested", Job: "j1",
		Report: "sales", IP: "192.0.2.7", Detail: "Umlaute ü and 😀 kept"})
	if first.Seq <= 0 || !first.At.Equal(h.Now()) {
		t.Errorf("appended entry: seq %d at %v; want a seq and the store's clock %v", first.Seq, first.At, h.Now())
	}
	at := h.Now().Add(-time.Hour).Truncate(time.Millisecond)
	h.Advance(time.Second)
	second := audit(t, h, store.AuditEntry{Actor: "local", Action: "signin", At: at})
	if second.Seq <= first.Seq || !second.At.Equal(at) {
		t.Errorf("second entry: seq %d (first %d) at %v; want a greater seq at %v", second.Seq, first.Seq, second.At, at)
	}
	es, err := h.Store.AuditLog(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Fatalf("log holds %d entries, want 2", len(es))
	}
	for i, want := range []store.AuditEntry{second, first} {
		if got := es[i]; got != want || got.At.Location() != time.UTC {
			t.Errorf("entry %d = %+v (%v)\nwant %+v in UTC", i, got, got.At.Location(), want)
		}
	}
}

// The log reads newest first by Seq (not by At: an entry may carry an earlier time),
// each filter and their combinations keep what equals them, and paging with the
// cursor neither skips nor repeats.
func testAuditFilters(t *testing.T, h Harness) {
	type row struct {
		seq                int64
		actor, action, job string
	}
	var rows []row // oldest first
	base := h.Now()
	for i := range 24 {
		e := store.AuditEntry{
			Actor:  []string{"ann", "bob", "cid"}[i%3],
			Action: []string{"signin", "export_requested", "file_downloaded", "forbidden"}[i%4],
			Job:    []string{"", "j1", "j2"}[i%3*(i%2)],
			// Times that go backwards now and then: the order is Seq's.
			At: base.Add(time.Duration((i*7)%5) * time.Minute),
		}
		got := audit(t, h, e)
		rows = append(rows, row{got.Seq, e.Actor, e.Action, e.Job})
	}
	want := func(keep func(row) bool) []int64 {
		out := []int64{}
		for i := len(rows) - 1; i >= 0; i-- {
			if keep(rows[i]) {
				out = append(out, rows[i].seq)
			}
		}
		return out
	}
	for _, f := range []store.AuditFilter{
		{}, {Actor: "ann"}, {Action: "forbidden"}, {Job: "j1"}, {Job: "j2"},
		{Actor: "bob", Action: "export_requested"}, {Actor: "cid", Job: "j2"}, {Action: "signin", Job: "j1"},
		{Actor: "ann", Action: "file_downloaded", Job: "j2"}, {Actor: "nobody"}, {Action: "nothing"}, {Job: "j9"},
	} {
		exp := want(func(r row) bool {
			return (f.Actor == "" || r.actor == f.Actor) && (f.Action == "" || r.action == f.Action) && (f.Job == "" || r.job == f.Job)
		})
		f.Limit = 1000
		if got := auditSeqs(t, h, f); !slices.Equal(got, exp) {
			t.Errorf("%+v = %v\nwant %v", f, got, exp)
		}
		for _, limit := range []int{1, 3} {
			f.Limit = limit
			if got := pageAudit(t, h, f); !slices.Equal(got, exp) {
				t.Errorf("%+v paged = %v\nwant %v", f, got, exp)
			}
		}
	}
	// The cursor alone: the entries before it.
	mid := rows[10].seq
	if got, exp := auditSeqs(t, h, store.AuditFilter{Before: mid, Limit: 1000}), want(func(r row) bool { return r.seq < mid }); !slices.Equal(got, exp) {
		t.Errorf("before %d = %v, want %v", mid, got, exp)
	}
	// A filter no entry can hold matches nothing, as any unknown value does.
	for _, f := range []store.AuditFilter{{Actor: "a\x00n"}, {Job: "\xff"}, {Action: "sign\x00in"}} {
		if got := auditSeqs(t, h, f); len(got) != 0 {
			t.Errorf("%q = %v, want none", []string{f.Actor, f.Action, f.Job}, got)
		}
	}
}

// The page is 50 entries when no limit is given and at most 1000.
func testAuditLimits(t *testing.T, h Harness) {
	for i := range 1002 {
		audit(t, h, store.AuditEntry{Actor: "ann", Action: "signin", Detail: fmt.Sprint(i)})
	}
	for _, c := range []struct{ limit, want int }{{0, 50}, {-1, 50}, {7, 7}, {1000, 1000}, {5000, 1000}} {
		if got := auditSeqs(t, h, store.AuditFilter{Limit: c.limit}); len(got) != c.want {
			t.Errorf("limit %d reads %d entries, want %d", c.limit, len(got), c.want)
		}
	}
}

// An entry without an actor or an action, with a field beyond its bound, or with text
// no database keeps, is refused before it is written: nothing reaches the log.
func testAuditRefusals(t *testing.T, h Harness) {
	ok := store.AuditEntry{Actor: "ann", Action: "signin"}
	long := strings.Repeat("é", store.AuditFieldMax+1)
	for name, c := range map[string]struct {
		e    func(e *store.AuditEntry)
		want error
	}{
		"no actor":          {func(e *store.AuditEntry) { e.Actor = "" }, store.ErrAuditInvalid},
		"no action":         {func(e *store.AuditEntry) { e.Action = "" }, store.ErrAuditInvalid},
		"long actor":        {func(e *store.AuditEntry) { e.Actor = long }, store.ErrAuditInvalid},
		"long action":       {func(e *store.AuditEntry) { e.Action = long }, store.ErrAuditInvalid},
		"long job":          {func(e *store.AuditEntry) { e.Job = long }, store.ErrAuditInvalid},
		"long report":       {func(e *store.AuditEntry) { e.Report = long }, store.ErrAuditInvalid},
		"long ip":           {func(e *store.AuditEntry) { e.IP = long }, store.ErrAuditInvalid},
		"long detail":       {func(e *store.AuditEntry) { e.Detail = strings.Repeat("x", store.AuditDetailMax+1) }, store.ErrAuditInvalid},
		"NUL in actor":      {func(e *store.AuditEntry) { e.Actor = "a\x00n" }, store.ErrUnstorable},
		"NUL in detail":     {func(e *store.AuditEntry) { e.Detail = "x\x00" }, store.ErrUnstorable},
		"not UTF-8 in job":  {func(e *store.AuditEntry) { e.Job = "j\xff" }, store.ErrUnstorable},
		"not UTF-8 in ip":   {func(e *store.AuditEntry) { e.IP = "\xc3" }, store.ErrUnstorable},
		"not UTF-8 report":  {func(e *store.AuditEntry) { e.Report = "\xed\xa0\x80" }, store.ErrUnstorable},
		"NUL in the action": {func(e *store.AuditEntry) { e.Action = "sign\x00in" }, store.ErrUnstorable},
	} {
		e := ok
		c.e(&e)
		if _, err := h.Store.Audit(ctx, e); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	if got := auditSeqs(t, h, store.AuditFilter{}); len(got) != 0 {
		t.Fatalf("refused entries were written: %v", got)
	}
	// At the bounds, an entry is kept whole.
	e := store.AuditEntry{Actor: strings.Repeat("é", store.AuditFieldMax), Action: "signin",
		Detail: strings.Repeat("😀", store.AuditDetailMax)}
	got := audit(t, h, e)
	if es, err := h.Store.AuditLog(ctx, store.AuditFilter{}); err != nil || len(es) != 1 || es[0] != got ||
		es[0].Actor != e.Actor || es[0].Detail != e.Detail {
		t.Fatalf("entry at the bounds did not read back whole: %v", err)
	}
}

// PruneAudit removes the entries stamped before its time, oldest first, at most limit
// at a time, and keeps the rest.
func testAuditPrune(t *testing.T, h Harness) {
	now := h.Now()
	var old, recent []int64
	for i := range 30 {
		age := time.Duration(30-i) * 24 * time.Hour // 30 days old ... 1 day old
		e := audit(t, h, store.AuditEntry{Actor: "ann", Action: "signin", At: now.Add(-age)})
		if age > 10*24*time.Hour {
			old = append(old, e.Seq)
		} else {
			recent = append(recent, e.Seq)
		}
	}
	cut := now.Add(-10 * 24 * time.Hour)
	n, err := h.Store.PruneAudit(ctx, cut, 7)
	if err != nil || n != 7 {
		t.Fatalf("prune with limit 7 = %d, %v; want 7", n, err)
	}
	left := auditSeqs(t, h, store.AuditFilter{Limit: 1000})
	if slices.ContainsFunc(old[:7], func(s int64) bool { return slices.Contains(left, s) }) ||
		!slices.Contains(left, old[7]) {
		t.Fatalf("a prune of 7 left %v; want the 7 oldest of %v gone", left, old)
	}
	for {
		n, err := h.Store.PruneAudit(ctx, cut, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	left = auditSeqs(t, h, store.AuditFilter{Limit: 1000})
	slices.Reverse(left)
	if !slices.Equal(left, recent) {
		t.Fatalf("after pruning: %v, want the recent %v", left, recent)
	}
	if n, err := h.Store.PruneAudit(ctx, cut, 100); err != nil || n != 0 {
		t.Fatalf("a second prune removed %d, %v; want 0", n, err)
	}
}

// Nodes that prune at the same time remove every old entry once between them.
func testAuditConcurrentPrunes(t *testing.T, h Harness) {
	now := h.Now()
	for range 200 {
		audit(t, h, store.AuditEntry{Actor: "ann", Action: "signin", At: now.Add(-48 * time.Hour)})
	}
	keep := audit(t, h, store.AuditEntry{Actor: "ann", Action: "signin"})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	for range 4 {
		wg.Go(func() {
			for {
				n, err := h.Store.PruneAudit(ctx, now.Add(-time.Hour), 10)
				mu.Lock()
				total += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if n == 0 || err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent prunes failed: %v", errs)
	}
	// A prune that found its batch taken by another node may stop early: one more
	// prune ends the work, and the count adds up.
	n, err := h.Store.PruneAudit(ctx, now.Add(-time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if total+n != 200 {
		t.Fatalf("prunes removed %d+%d entries, want 200", total, n)
	}
	if got := auditSeqs(t, h, store.AuditFilter{}); !slices.Equal(got, []int64{keep.Seq}) {
		t.Fatalf("left %v, want only %d", got, keep.Seq)
	}
}

// An acknowledged entry is still there after the store is opened again, and a Seq is
// never given out twice.
func testAuditIsDurable(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen its store")
	}
	a := audit(t, h, store.AuditEntry{Actor: "ann", Action: "export_requested", Job: "j1"})
	b := audit(t, h, store.AuditEntry{Actor: "ann", Action: "file_downloaded", Job: "j1", At: h.Now().Add(-time.Hour)})
	// The newest entry pruned: its Seq must not come back.
	if n, err := h.Store.PruneAudit(ctx, h.Now(), 1000); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	st := h.Reopen(t)
	es, err := st.AuditLog(ctx, store.AuditFilter{})
	if err != nil || len(es) != 1 || es[0] != a {
		t.Fatalf("after reopening: %v, %v; want %+v", es, err, a)
	}
	c, err := st.Audit(ctx, store.AuditEntry{Actor: "ann", Action: "signin"})
	if err != nil || c.Seq <= b.Seq {
		t.Fatalf("entry after reopening: seq %d, %v; want more than %d", c.Seq, err, b.Seq)
	}
}

// A person's identity reads back byte for byte with when they were last seen, a later
// save replaces it, and one never seen is ErrNotFound.
func testPeopleSeen(t *testing.T, h Harness) {
	if _, _, err := h.Store.Person(ctx, "ann@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown person: %v, want ErrNotFound", err)
	}
	first := json.RawMessage(`{"name":"ann@example.com", "role":"member","attrs":{"region":"North","note":"\u0000 ü"}}`)
	if err := h.Store.SavePerson(ctx, "ann@example.com", first); err != nil {
		t.Fatal(err)
	}
	who, seen, err := h.Store.Person(ctx, "ann@example.com")
	if err != nil || string(who) != string(first) || !seen.Equal(h.Now()) {
		t.Fatalf("person = %s seen %v, %v; want %s seen %v", who, seen, err, first, h.Now())
	}
	h.Advance(time.Hour)
	second := json.RawMessage(`{"name":"ann@example.com","role":"admin"}`)
	if err := h.Store.SavePerson(ctx, "ann@example.com", second); err != nil {
		t.Fatal(err)
	}
	if who, seen, err = h.Store.Person(ctx, "ann@example.com"); err != nil || string(who) != string(second) || !seen.Equal(h.Now()) {
		t.Fatalf("person after a second save = %s seen %v, %v; want %s seen %v", who, seen, err, second, h.Now())
	}
	big := json.RawMessage(`"` + strings.Repeat("x", store.PersonMax-2) + `"`)
	if err := h.Store.SavePerson(ctx, "bob", big); err != nil {
		t.Fatalf("a person of exactly %d bytes: %v", store.PersonMax, err)
	}
	for name, c := range map[string]struct {
		name string
		who  json.RawMessage
		want error
	}{
		"no name":       {"", first, store.ErrPersonInvalid},
		"long name":     {strings.Repeat("n", store.AuditFieldMax+1), first, store.ErrPersonInvalid},
		"not JSON":      {"cid", json.RawMessage(`{"name":`), store.ErrPersonInvalid},
		"empty":         {"cid", nil, store.ErrPersonInvalid},
		"too big":       {"cid", json.RawMessage(`"` + strings.Repeat("x", store.PersonMax-1) + `"`), store.ErrPersonInvalid},
		"NUL in a name": {"c\x00d", first, store.ErrUnstorable},
		"not UTF-8":     {"c\xffd", first, store.ErrUnstorable},
	} {
		if err := h.Store.SavePerson(ctx, c.name, c.who); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	for _, name := range []string{"cid", "", "c\x00d"} {
		if _, _, err := h.Store.Person(ctx, name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("person %q: %v, want ErrNotFound", name, err)
		}
	}
}

// A job enqueued with an audit entry is written with it, in one transaction and with
// the job's id; a request answered with the job its key already has writes none, nor
// does a refused one; several in one group commit each get theirs (NewJob.Audit).
func testEnqueueAudit(t *testing.T, h Harness) {
	entry := func(detail string) func(*store.NewJob) {
		return func(nj *store.NewJob) {
			nj.Audit = &store.AuditEntry{Actor: "ann@example.com", Action: "export_requested", Report: "sales", IP: "192.0.2.7", Detail: detail}
		}
	}
	keyed := func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "k1", "h1" }
	j := enqueue(t, h, entry("first"), keyed)
	es, err := h.Store.AuditLog(ctx, store.AuditFilter{Job: j.ID})
	if err != nil || len(es) != 1 || es[0].Detail != "first" || es[0].Actor != "ann@example.com" || es[0].Report != "sales" ||
		es[0].IP != "192.0.2.7" || !es[0].At.Equal(h.Now()) {
		t.Fatalf("the job's entry: %+v, %v; want one, as given, at the store's clock", es, err)
	}
	again, existed, err := h.Store.Enqueue(ctx, newJob(entry("replay"), keyed))
	if err != nil || !existed || again.ID != j.ID {
		t.Fatalf("replay: %v existed=%v %v", again.ID, existed, err)
	}
	if _, _, err := h.Store.Enqueue(ctx, newJob(entry("mismatch"), func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "k1", "h2" })); err == nil {
		t.Fatal("a reused key with another request was accepted")
	}
	if _, _, err := h.Store.Enqueue(ctx, newJob(entry("bad"), func(nj *store.NewJob) { nj.Audit.Actor = "" })); err == nil {
		t.Fatal("a job whose entry has no actor was accepted")
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := h.Store.Enqueue(ctx, newJob(entry(fmt.Sprint("group ", i))))
			if err != nil {
				t.Errorf("enqueue %d: %v", i, err)
			}
			ids[i] = got.ID
		}()
	}
	wg.Wait()
	all, err := h.Store.AuditLog(ctx, store.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1+len(ids) {
		t.Fatalf("%d entries, want %d: the first job's and one per job of the group, none for a replay or a refusal", len(all), 1+len(ids))
	}
	for i, id := range ids {
		es, err := h.Store.AuditLog(ctx, store.AuditFilter{Job: id})
		if err != nil || len(es) != 1 || es[0].Detail != fmt.Sprint("group ", i) {
			t.Errorf("job %d's entry: %+v, %v", i, es, err)
		}
	}
}
