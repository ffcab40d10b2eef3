package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sheetq/store"
	"strings"
	"testing"
)

// TestAcceptWritesNoListingIndex guards migration 0006: every index a PENDING job
// enters is a page in the WAL before its 202 (BENCHMARKS.md). Accepting a job may write
// the table, its id, the claim index and (with a key) the idempotency index; anything
// else a listing needs must be a partial index that leaves PENDING jobs out.
func TestAcceptWritesNoListingIndex(t *testing.T) {
	allowed := map[string]bool{"sqlite_autoindex_jobs_1": true, "jobs_claim": true, "jobs_idempotency_key": true}
	// jobs_parent (migration 0008) holds only follow-ups, which Enqueue never writes.
	skipsPending := []string{`WHERE status <> 'PENDING'`, `WHERE status <> 'PENDING' AND status <> 'PROCESSING'`,
		`WHERE status = 'PROCESSING'`, `WHERE parent_id IS NOT NULL`}
	for name, def := range jobsIndexes(t, openBench(t)) {
		if allowed[name] {
			continue
		}
		ok := false
		for _, w := range skipsPending {
			ok = ok || strings.HasSuffix(strings.TrimSpace(def), w)
		}
		if !ok {
			t.Errorf("index %s is written for every accepted job: %s", name, def)
		}
	}
}

// TestClaimWritesNoListingIndex guards migration 0015: a claim, inside the writer's one
// transaction (rule 31), changes the job's row, jobs_claim (it leaves) and jobs_running
// (it enters); the listing indexes hold ended jobs only. An index of every job would be
// written too, but a claim changes none of its columns (the id, the key, the parent).
func TestClaimWritesNoListingIndex(t *testing.T) {
	allowed := map[string]bool{"sqlite_autoindex_jobs_1": true, "jobs_claim": true, "jobs_running": true,
		"jobs_idempotency_key": true, "jobs_parent": true}
	for name, def := range jobsIndexes(t, openBench(t)) {
		if !allowed[name] && !strings.HasSuffix(strings.TrimSpace(def), `WHERE status <> 'PENDING' AND status <> 'PROCESSING'`) {
			t.Errorf("index %s is written by every claim: %s", name, def)
		}
	}
}

// jobsIndexes is the jobs table's indexes by name, with their definitions ("" for
// SQLite's own).
func jobsIndexes(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	rows, err := driverOf(s).r.Query(`SELECT name, coalesce(sql, '') FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		out[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestListPlans checks every shape of List's query against the planner: the PENDING part
// searches jobs_claim, the settled part reads its partial index newest first without a
// sort, and no filtered listing scans the table.
func TestListPlans(t *testing.T) {
	s := openBench(t)
	ctx := context.Background()
	// Enough rows of each kind and state that a plan reading the wrong index would show.
	for i := range 400 {
		args := fmt.Sprintf(`{"report":"r%d","params":{}}`, i%7)
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("job%04d", i), Kind: "export", Args: []byte(args)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := s.Cancel(ctx, fmt.Sprintf("job%04d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Running jobs too, which List reads through jobs_running.
	for range 20 {
		if _, err := s.Claim(ctx, "w", store.DefaultQueue); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := driverOf(s).w.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    store.ListOptions
		want []string // each must appear in the plan
	}{
		{"newest", store.ListOptions{Kind: "export"}, []string{"SCAN jobs"}},
		{"newest, after a cursor", store.ListOptions{Kind: "export", Before: 100}, []string{"SEARCH jobs USING INTEGER PRIMARY KEY (rowid<?)"}},
		{"pending", store.ListOptions{Kind: "export", Status: store.StatusPending}, []string{"USING INDEX jobs_claim"}},
		{"canceled", store.ListOptions{Kind: "export", Status: store.StatusCanceled}, []string{"USING INDEX jobs_settled_status (kind=? AND status=?)"}},
		{"canceled, after a cursor", store.ListOptions{Kind: "export", Status: store.StatusCanceled, Before: 100}, []string{"USING INDEX jobs_settled_status (kind=? AND status=? AND rowid<?)"}},
		{"report", store.ListOptions{Kind: "export", Report: "r3"}, []string{"USING INDEX jobs_claim", "USING INDEX jobs_running", "USING INDEX jobs_settled_report (kind=? AND <expr>=?)"}},
		{"report and status", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusCanceled}, []string{"USING INDEX jobs_settled_report (kind=? AND <expr>=?)"}},
		{"report and pending", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusPending}, []string{"USING INDEX jobs_claim"}},
		{"running", store.ListOptions{Kind: "export", Status: store.StatusProcessing}, []string{"USING INDEX jobs_running"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, args := listQuery(tt.o)
			plan := explain(t, driverOf(s).r, q, args...)
			for _, w := range tt.want {
				if !strings.Contains(plan, w) {
					t.Errorf("plan has no %q:\n%s", w, plan)
				}
			}
			// Only the PENDING and running parts may sort (bounded by the queue and by the
			// workers); nothing filtered reads the whole table.
			if tt.o.Status != store.StatusPending && tt.o.Status != store.StatusProcessing && tt.o.Report == "" && strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("plan sorts:\n%s", plan)
			}
			if (tt.o.Status != "" || tt.o.Report != "") && strings.Contains(plan, "SCAN jobs\n") {
				t.Errorf("plan scans the table:\n%s", plan)
			}
			if _, err := s.List(ctx, tt.o); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScheduleFiringsPlan: a schedule's firings are a range of the idempotency keys'
// index, read backwards, never a scan of the jobs or a sort.
func TestScheduleFiringsPlan(t *testing.T) {
	s := openBench(t)
	lo, hi := store.FiringKeyRange("s1")
	plan := explain(t, driverOf(s).r, firingsQuery, lo, hi, 10)
	if !strings.Contains(plan, "SEARCH jobs USING INDEX jobs_idempotency_key (idempotency_key>? AND idempotency_key<?)") ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan:\n%s", plan)
	}
}

// TestPendingHeadPlan: the queue page's head of a queue reads jobs_claim in order: no
// sort, however deep the queue.
func TestPendingHeadPlan(t *testing.T) {
	s := openBench(t)
	plan := explain(t, driverOf(s).r, pendingHeadQuery, store.DefaultQueue, "export", 50)
	if !strings.Contains(plan, "SEARCH jobs USING INDEX jobs_claim (queue=?)") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan:\n%s", plan)
	}
}

func explain(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMigrationToInsertionOrder upgrades a database as 0005 left it, with jobs in it:
// the settled jobs enter the new partial indexes and every listing still finds them.
func TestMigrationToInsertionOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		id := fmt.Sprintf("job%d", i)
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: id, Kind: "export", Args: []byte(`{"report":"demo"}`)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if _, err := s.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Back to version 5: its indexes, not 0006's.
	s = reopenAfter(t, s, path,
		`DROP INDEX jobs_settled_status`, `DROP INDEX jobs_settled_report`,
		`CREATE INDEX jobs_created ON jobs (created_at DESC)`,
		`CREATE INDEX jobs_status_created ON jobs (status, created_at DESC)`,
		`CREATE INDEX jobs_kind_created ON jobs (kind, created_at DESC)`,
		`CREATE INDEX jobs_report_created ON jobs (json_extract(args, '$.report'), created_at DESC, id DESC)`,
		`DELETE FROM schema_migrations WHERE version = 6`,
	)
	defer s.Close()
	ids := func(o store.ListOptions) string {
		t.Helper()
		js, err := s.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		o    store.ListOptions
		want string
	}{
		{store.ListOptions{Kind: "export"}, "job5 job4 job3 job2 job1 job0"},
		{store.ListOptions{Kind: "export", Status: store.StatusCanceled}, "job5 job3 job1"},
		{store.ListOptions{Kind: "export", Status: store.StatusPending, Report: "demo"}, "job4 job2 job0"},
		{store.ListOptions{Kind: "export", Report: "demo", Limit: 4}, "job5 job4 job3 job2"},
		{store.ListOptions{Kind: "export", Report: "demo", Status: store.StatusCanceled, Before: 5}, "job3 job1"},
	} {
		if got := ids(tt.o); got != tt.want {
			t.Errorf("List(%+v) = %s, want %s", tt.o, got, tt.want)
		}
	}
	var n int
	if err := driverOf(s).r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('jobs_created', 'jobs_status_created', 'jobs_kind_created', 'jobs_report_created')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("old listing indexes left: %d (%v)", n, err)
	}
}

// TestMigrationToQueues upgrades a database as 0008 left it: webhook deliveries go to
// the webhooks queue, every other job to exports, and the claim index is replaced by
// one that starts with the queue (rule 18: no index is added to the accept path).
func TestMigrationToQueues(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct{ id, kind string }{{"exp", "export"}, {"hook", "webhook"}, {"other", "test"}} {
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: j.id, Kind: j.kind, Args: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Back to version 8: no queue column, the old claim index.
	s = reopenAfter(t, s, path,
		`DROP INDEX jobs_claim`,
		`ALTER TABLE jobs DROP COLUMN queue`,
		`CREATE INDEX jobs_claim ON jobs (priority, run_at) WHERE status = 'PENDING'`,
		`DELETE FROM schema_migrations WHERE version = 9`,
	)
	defer s.Close()
	for id, want := range map[string]string{"exp": store.DefaultQueue, "hook": "webhooks", "other": store.DefaultQueue} {
		if j, err := s.Get(ctx, id); err != nil || j.Queue != want {
			t.Errorf("job %s after 0009: queue %q, %v; want %q", id, j.Queue, err, want)
		}
	}
	if j, err := s.Claim(ctx, "w", "webhooks"); err != nil || j.ID != "hook" {
		t.Errorf("claim from webhooks after 0009 = %s, %v; want hook", j.ID, err)
	}
	var def string
	if err := driverOf(s).r.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'jobs_claim'`).Scan(&def); err != nil ||
		!strings.Contains(def, "(queue, priority, run_at)") {
		t.Errorf("jobs_claim after 0009 = %q, %v", def, err)
	}
	plan := explain(t, driverOf(s).r, `SELECT rowid FROM jobs WHERE status = 'PENDING' AND queue = ? AND run_at <= ?
		ORDER BY priority, run_at, rowid LIMIT 1`, store.DefaultQueue, 0)
	if !strings.Contains(plan, "INDEX jobs_claim (queue=?") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("claim plan does not read jobs_claim in order:\n%s", plan)
	}
}

// reopenAfter runs stmts on s's writer (taking the file back to an older schema), closes
// s and opens the file again, which migrates it forward.
func reopenAfter(t *testing.T, s *store.Store, path string, stmts ...string) *store.Store {
	t.Helper()
	for _, q := range stmts {
		if _, err := driverOf(s).w.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	s.Close()
	again, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return again
}
