package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest/mysqltest"
)

// The plan tests: every listing's statement, explained by the server on tables filled
// as months of use would leave them, reads the index made for it, never scans the table,
// and sorts only where its case allows (ARCHITECTURE.md, "MySQL and MariaDB", Reads).

// planStore is a store on a fresh database and a connection of the test's own to it.
func planStore(t *testing.T) (*store.Store, *sql.DB) {
	t.Helper()
	dsn := mysqltest.FreshDatabase(t)
	st, err := mysql.Open(context.Background(), dsn, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return st, db
}

// fillJobs writes n jobs straight into the table: most exports SUCCEEDED, some FAILED,
// CANCELED or EXPIRED, one in five a webhook delivery, a few old PENDING retries, the
// newest ones PENDING and a few PROCESSING, seven reports, fifty people.
func fillJobs(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	start := time.Now().UTC().Add(-time.Duration(n) * time.Second)
	const batch = 500
	for lo := 1; lo <= n; lo += batch {
		var b strings.Builder
		var args []any
		b.WriteString(`INSERT INTO jobs (id, kind, args, status, run_at, attempt, created_at, started_at,
			heartbeat_at, finished_at, created_by) VALUES `)
		for i := lo; i < lo+batch && i <= n; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			at := start.Add(time.Duration(i) * time.Second)
			kind := "export"
			if i%5 == 0 {
				kind = "webhook"
			}
			status := "SUCCEEDED"
			switch {
			case i > n-200:
				status = "PENDING"
			case i > n-210:
				status = "PROCESSING"
			case i%97 == 0:
				status = "PENDING"
			case i%31 == 0:
				status = "FAILED"
			case i%37 == 0:
				status = "CANCELED"
			case i%41 == 0:
				status = "EXPIRED"
			}
			attempt := 0
			var started, finished any
			if status != "PENDING" {
				started = at
			} else if i <= n-200 {
				attempt = 1
			}
			if status != "PENDING" && status != "PROCESSING" {
				finished = at.Add(time.Second)
			}
			args = append(args, fmt.Sprintf("job%06d", i), kind, fmt.Sprintf(`{"report":"r%d","params":{}}`, i%7),
				status, at, attempt, at, started, started, finished, fmt.Sprintf("p%d", i%50))
		}
		if _, err := db.ExecContext(ctx, b.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `ANALYZE TABLE jobs`); err != nil {
		t.Fatal(err)
	}
}

// plan is what EXPLAIN says of a statement, one line per table read, with its type
// (ALL: a scan of the whole table), its key and its Extra ("Using filesort": a sort).
type plan struct {
	rows []map[string]string
	text string
}

func explain(t *testing.T, db *sql.DB, q string, args ...any) plan {
	t.Helper()
	rows, err := db.Query(`EXPLAIN `+q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var p plan
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		p.rows = append(p.rows, row)
		p.text += fmt.Sprintf("table=%s type=%s key=%s rows=%s extra=%s\n", row["table"], row["type"], row["key"], row["rows"], row["extra"])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// check wants the plan to read one of keys (any, when keys is empty), never to scan a
// table, and not to sort unless sorts.
func (p plan) check(t *testing.T, keys []string, sorts bool) {
	t.Helper()
	used := false
	for _, r := range p.rows {
		if r["type"] == "ALL" {
			t.Errorf("the plan scans %s:\n%s", r["table"], p.text)
		}
		if !sorts && strings.Contains(r["extra"], "filesort") {
			t.Errorf("the plan sorts:\n%s", p.text)
		}
		for _, k := range keys {
			if r["key"] == k {
				used = true
			}
		}
	}
	if len(keys) > 0 && !used {
		t.Errorf("the plan reads none of %v:\n%s", keys, p.text)
	}
	if testing.Verbose() {
		t.Logf("%s", p.text)
	}
}

type listPlan struct {
	name  string
	o     store.ListOptions
	keys  []string // the plan reads one of these
	sorts bool     // the plan may sort
}

func checkListPlans(t *testing.T, st *store.Store, db *sql.DB, tests []listPlan) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Limit = 50
			q, args, ok := mysql.ListQuery(o)
			if !ok {
				t.Fatal("no statement")
			}
			explain(t, db, q, args...).check(t, tt.keys, tt.sorts)
			js, err := st.List(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(js) == 0 {
				t.Fatal("the listing is empty")
			}
			for _, j := range js {
				if o.CreatedBy != "" && j.CreatedBy != o.CreatedBy || o.Status != "" && j.Status != o.Status || o.Kind != "" && j.Kind != o.Kind {
					t.Fatalf("listed %s (%s, %s, by %q) for %+v", j.ID, j.Kind, j.Status, j.CreatedBy, o)
				}
			}
		})
	}
}

// TestListPlans: every shape of List's statement among 20,000 jobs reads its index
// (migration 0002's for the report), scans no table and does not sort.
func TestListPlans(t *testing.T) {
	st, db := planStore(t)
	fillJobs(t, db, 20_000)
	const cursor = 15_000
	checkListPlans(t, st, db, []listPlan{
		// Most jobs are exports: the newest are read from the newest of all, as on
		// PostgreSQL (jobs_seq) and SQLite.
		{"newest", store.ListOptions{Kind: "export"}, []string{"seq"}, false},
		{"newest, after a cursor", store.ListOptions{Kind: "export", Before: cursor}, []string{"seq"}, false},
		{"any kind", store.ListOptions{}, []string{"seq"}, false},
		{"pending", store.ListOptions{Kind: "export", Status: store.StatusPending}, []string{"jobs_kind", "jobs_status"}, false},
		{"processing", store.ListOptions{Kind: "export", Status: store.StatusProcessing}, []string{"jobs_kind", "jobs_status"}, false},
		{"canceled", store.ListOptions{Kind: "export", Status: store.StatusCanceled}, []string{"jobs_kind", "jobs_status"}, false},
		{"failed, after a cursor", store.ListOptions{Kind: "export", Status: store.StatusFailed, Before: cursor}, []string{"jobs_kind", "jobs_status"}, false},
		{"report", store.ListOptions{Kind: "export", Report: "r3"}, []string{"jobs_report"}, false},
		{"report, after a cursor", store.ListOptions{Kind: "export", Report: "r3", Before: cursor}, []string{"jobs_report"}, false},
		{"report and status", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusSucceeded}, []string{"jobs_report", "jobs_kind"}, false},
		{"report and pending", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusPending}, []string{"jobs_report", "jobs_kind"}, false},
		{"own", store.ListOptions{Kind: "export", CreatedBy: "p3"}, []string{"jobs_created_by"}, false},
		{"own, after a cursor", store.ListOptions{Kind: "export", CreatedBy: "p3", Before: cursor}, []string{"jobs_created_by"}, false},
		{"own, one report", store.ListOptions{Kind: "export", CreatedBy: "p3", Report: "r3"}, []string{"jobs_created_by", "jobs_report"}, false},
		{"own, pending", store.ListOptions{Kind: "export", CreatedBy: "p3", Status: store.StatusPending}, nil, false},
	})
}

// TestScheduleFiringsPlan: a schedule's firings are a range of jobs_idempotency_key
// among 20,000 jobs of which a tenth are firings.
func TestScheduleFiringsPlan(t *testing.T) {
	st, db := planStore(t)
	fillJobs(t, db, 20_000)
	if _, err := db.Exec(`UPDATE jobs SET idempotency_key = CONCAT('schedule:s', seq % 7, ':', seq) WHERE seq % 10 = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE TABLE jobs`); err != nil {
		t.Fatal(err)
	}
	lo, hi := store.FiringKeyRange("s3")
	explain(t, db, mysql.FiringsQuery, lo, hi, 50).check(t, []string{"jobs_idempotency_key"}, false)
	if got, err := st.ScheduleFirings(context.Background(), "s3", 1000); err != nil || len(got) != 286 {
		t.Fatalf("firings of s3: %d, %v; want 286", len(got), err)
	}
}

// TestPendingHeadPlan: the queue page's head of a queue reads jobs_claim in order.
func TestPendingHeadPlan(t *testing.T) {
	_, db := planStore(t)
	fillJobs(t, db, 20_000)
	explain(t, db, mysql.PendingHeadQuery, store.DefaultQueue, "export", 50).check(t, []string{"jobs_claim"}, false)
}

// TestAuditLogPlans: every filter of the audit log reads its index among 20,000
// entries; none scans the table or sorts.
func TestAuditLogPlans(t *testing.T) {
	_, db := planStore(t)
	start := time.Now().UTC().Add(-20_000 * time.Second)
	actions := []string{"signin", "export_requested", "file_downloaded", "forbidden"}
	for lo := 1; lo <= 20_000; lo += 500 {
		var b strings.Builder
		var args []any
		b.WriteString(`INSERT INTO audit_log (at, actor, action, job, detail) VALUES `)
		for i := lo; i < lo+500; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, '')")
			action := actions[i%4]
			if i%200 == 0 {
				action = "signin_failed"
			}
			job := ""
			if i%4 != 0 {
				job = fmt.Sprintf("job%d", i%500)
			}
			args = append(args, start.Add(time.Duration(i)*time.Second), fmt.Sprintf("p%d", i%40), action, job)
		}
		if _, err := db.Exec(b.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`ANALYZE TABLE audit_log`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f    store.AuditFilter
		want string
	}{
		{store.AuditFilter{Limit: 50}, "PRIMARY"},
		{store.AuditFilter{Before: 15_000, Limit: 50}, "PRIMARY"},
		{store.AuditFilter{Actor: "p3", Limit: 50}, "audit_actor"},
		{store.AuditFilter{Action: "signin_failed", Before: 15_000, Limit: 50}, "audit_action"},
		{store.AuditFilter{Job: "job7", Limit: 50}, "audit_job"},
	} {
		t.Run(fmt.Sprintf("%+v", tt.f), func(t *testing.T) {
			q, args := mysql.AuditQuery(tt.f)
			explain(t, db, q, args...).check(t, []string{tt.want}, false)
		})
	}
}
