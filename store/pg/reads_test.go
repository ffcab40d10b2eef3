package pg_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
	"sheetq/store/pg"
)

// fillJobs writes n jobs straight into the table, as months of use would leave it: most
// exports SUCCEEDED, some FAILED, CANCELED or EXPIRED, one in five a webhook delivery, a
// few old PENDING retries, the newest ones PENDING and a few PROCESSING, seven reports.
func fillJobs(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	if _, err := conn.Exec(ctx, `INSERT INTO jobs (id, kind, args, status, run_at, attempt, created_at,
			started_at, heartbeat_at, finished_at)
		SELECT 'job' || lpad(i::text, 6, '0'), k, json_build_object('report', 'r' || (i % 7), 'params', json_build_object()),
			st, t, CASE WHEN st = 'PENDING' AND i <= $1 - 200 THEN 1 ELSE 0 END, t,
			CASE WHEN st <> 'PENDING' THEN t END, CASE WHEN st <> 'PENDING' THEN t END,
			CASE WHEN st NOT IN ('PENDING', 'PROCESSING') THEN t + interval '1 second' END
		FROM generate_series(1, $1) i,
			LATERAL (SELECT now() - ($1 - i) * interval '1 second' AS t,
				CASE WHEN i % 5 = 0 THEN 'webhook' ELSE 'export' END AS k,
				CASE WHEN i > $1 - 200 THEN 'PENDING'
					WHEN i > $1 - 210 THEN 'PROCESSING'
					WHEN i % 97 = 0 THEN 'PENDING'
					WHEN i % 31 = 0 THEN 'FAILED'
					WHEN i % 37 = 0 THEN 'CANCELED'
					WHEN i % 41 = 0 THEN 'EXPIRED'
					ELSE 'SUCCEEDED' END AS st) x`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
}

// storeWithConn is a store on a fresh schema and a connection of the test's own to it,
// closed when the test ends.
func storeWithConn(t *testing.T) (*store.Store, *pgx.Conn) {
	t.Helper()
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return st, conn
}

// TestListPlans checks every shape of List's statement against the planner on 20,000
// jobs, with the plans PostgreSQL makes for the values (custom) and for any value
// (generic, which a prepared statement may switch to): each reads the index migration
// 0004 made for it, none scans the table, and only the unfinished part of a listing
// sorts (PENDING and PROCESSING jobs are few by nature).
func TestListPlans(t *testing.T) {
	st, conn := storeWithConn(t)
	fillJobs(t, conn, 20_000)
	const cursor = 15_000
	checkListPlans(t, st, conn, []listPlan{
		{"newest", store.ListOptions{Kind: "export"}, []string{"Index Scan Backward using jobs_seq"}, false},
		{"newest, after a cursor", store.ListOptions{Kind: "export", Before: cursor}, []string{"Index Scan Backward using jobs_seq", "Index Cond: (seq < "}, false},
		{"any kind", store.ListOptions{}, []string{"Index Scan Backward using jobs_seq"}, false},
		{"pending", store.ListOptions{Kind: "export", Status: store.StatusPending}, []string{"jobs_claim"}, true},
		{"processing", store.ListOptions{Kind: "export", Status: store.StatusProcessing}, []string{"jobs_running"}, true},
		{"canceled", store.ListOptions{Kind: "export", Status: store.StatusCanceled}, []string{"Index Scan Backward using jobs_final_status"}, false},
		{"failed, after a cursor", store.ListOptions{Kind: "export", Status: store.StatusFailed, Before: cursor}, []string{"Index Scan Backward using jobs_final_status", "seq < "}, false},
		{"report", store.ListOptions{Kind: "export", Report: "r3"}, []string{"Index Scan Backward using jobs_final_report", "jobs_claim", "jobs_running"}, true},
		{"report, after a cursor", store.ListOptions{Kind: "export", Report: "r3", Before: cursor}, []string{"Index Scan Backward using jobs_final_report", "jobs_claim", "jobs_running"}, true},
		{"report and status", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusSucceeded}, []string{"Index Scan Backward using jobs_final_report"}, false},
		{"report and pending", store.ListOptions{Kind: "export", Report: "r3", Status: store.StatusPending}, []string{"jobs_claim"}, true},
	})
}

// listPlan is a shape of List's statement and what its plan must show.
type listPlan struct {
	name string
	o    store.ListOptions
	want []string // each must appear in the plan
	sort bool     // the plan may sort
}

// checkListPlans explains each listing in the custom and the generic plan (a prepared
// statement may switch to it): each plan names what its case wants, none scans the
// table, none sorts unless its case allows it, and List answers it, every job matching
// its creator when the listing names one.
func checkListPlans(t *testing.T, st *store.Store, conn *pgx.Conn, tests []listPlan) {
	t.Helper()
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				q, args, ok := pg.ListQuery(tt.o)
				if !ok {
					t.Fatal("no statement")
				}
				plan := explain(t, conn, q, args...)
				for _, w := range tt.want {
					if !strings.Contains(plan, w) {
						t.Errorf("plan has no %q:\n%s", w, plan)
					}
				}
				if strings.Contains(plan, "Seq Scan on jobs") {
					t.Errorf("plan scans the table:\n%s", plan)
				}
				if !tt.sort && strings.Contains(plan, "Sort") {
					t.Errorf("plan sorts:\n%s", plan)
				}
				if testing.Verbose() {
					t.Logf("%s", plan)
				}
				js, err := st.List(ctx, tt.o)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range js {
					if tt.o.CreatedBy != "" && j.CreatedBy != tt.o.CreatedBy {
						t.Fatalf("listed %s, created by %q", j.ID, j.CreatedBy)
					}
				}
			})
		}
	}
}

// TestScheduleFiringsPlan: a schedule's firings are a range of migration 0008's partial
// index, in either plan, among 20,000 jobs of which a tenth are firings.
func TestScheduleFiringsPlan(t *testing.T) {
	st, conn := storeWithConn(t)
	fillJobs(t, conn, 20_000)
	if _, err := conn.Exec(ctx, `UPDATE jobs SET idempotency_key = 'schedule:s' || (seq % 7) || ':' || seq
		WHERE seq % 10 = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	lo, hi := store.FiringKeyRange("s3")
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		plan := explain(t, conn, pg.FiringsQuery, lo, hi, 50)
		// A few hundred firings may be read by a bitmap scan and sorted: still the index.
		if !strings.Contains(plan, "jobs_schedule_firings") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan:\n%s", mode, plan)
		}
	}
	if got, err := st.ScheduleFirings(ctx, "s3", 1000); err != nil || len(got) != 286 {
		t.Fatalf("firings of s3: %d, %v; want 286", len(got), err)
	}
}

// TestPendingHeadPlan: the queue page's head of a queue reads jobs_claim in order, in
// either plan, among 20,000 jobs: no sort of the queue, however deep.
func TestPendingHeadPlan(t *testing.T) {
	st, conn := storeWithConn(t)
	fillJobs(t, conn, 20_000)
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		plan := explain(t, conn, pg.PendingHeadQuery, store.DefaultQueue, "export", 50)
		if !strings.Contains(plan, "Index Scan using jobs_claim") || strings.Contains(plan, "Sort") {
			t.Errorf("%s plan:\n%s", mode, plan)
		}
	}
	if got, err := st.PendingHead(ctx, store.DefaultQueue, "export", 50); err != nil || len(got) != 50 {
		t.Fatalf("pending head: %d, %v; want 50", len(got), err)
	}
}

// explain is the plan of q for args, from a prepared statement: the plan PostgreSQL makes
// for the values (a custom plan) unless plan_cache_mode forces the generic one.
func explain(t *testing.T, conn *pgx.Conn, q string, args ...any) string {
	t.Helper()
	types := make([]string, len(args))
	values := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			types[i], values[i] = "text", "'"+strings.ReplaceAll(v, "'", "''")+"'"
		default:
			types[i], values[i] = "bigint", fmt.Sprint(v)
		}
	}
	if _, err := conn.Exec(ctx, `PREPARE list_plan (`+strings.Join(types, ", ")+`) AS `+q); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer func() {
		if _, err := conn.Exec(ctx, `DEALLOCATE list_plan`); err != nil {
			t.Fatal(err)
		}
	}()
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE list_plan (`+strings.Join(values, ", ")+`)`)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestAcceptWritesOneListingIndex is rule 18 on PostgreSQL: an accepted job (without an
// idempotency key) enters the primary key, the claim index and jobs_seq, the listings'
// insertion order, and no other index: every other one is partial, with a predicate a
// PENDING job fails. The predicates are checked against a real PENDING row.
func TestAcceptWritesOneListingIndex(t *testing.T) {
	st, conn := storeWithConn(t)
	j := enqueue(t, st)
	rows, err := conn.Query(ctx, `SELECT c.relname, coalesce(pg_get_expr(i.indpred, i.indrelid), '')
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'jobs'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type index struct{ name, pred string }
	var indexes []index
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.pred); err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, ix)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var entered []string
	for _, ix := range indexes {
		in := ix.pred == ""
		if !in {
			if err := conn.QueryRow(ctx, `SELECT count(*) > 0 FROM jobs WHERE id = $1 AND (`+ix.pred+`)`, j.ID).Scan(&in); err != nil {
				t.Fatalf("%s: %v", ix.name, err)
			}
		}
		if in {
			entered = append(entered, ix.name)
		}
	}
	if want := "jobs_claim jobs_pkey jobs_seq"; strings.Join(entered, " ") != want {
		t.Fatalf("an accepted job enters %v, want %s", entered, want)
	}
}

// TestProbeWriteNamesARefusedWrite: a database that refuses the probe's write (as a
// standby does after a failover, SQLSTATE 25006) fails ProbeWrite with
// store.ErrReadOnly, every time it is asked; once writes work, one probe writes the row
// and vouches for a second of the database's clock, for every node: the probes within it
// write nothing.
func TestProbeWriteNamesARefusedWrite(t *testing.T) {
	dsn := freshSchema(t)
	clk := newClock()
	st := openStore(t, dsn, pg.Options{TestClock: clk.Now})
	other := openStore(t, dsn, pg.Options{TestClock: clk.Now}) // another node
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'cannot execute UPDATE in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON write_probe FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := st.ProbeWrite(ctx)
		var pe *pgconn.PgError
		if !errors.Is(err, store.ErrReadOnly) || !errors.As(err, &pe) || pe.Code != "25006" {
			t.Fatalf("probe of a read-only database: %v, want store.ErrReadOnly wrapping SQLSTATE 25006", err)
		}
	}
	if _, err := conn.Exec(ctx, `DROP TRIGGER refuse ON write_probe`); err != nil {
		t.Fatal(err)
	}
	// row is the probe row's version (its xmin: a write makes a new one) and its stamp.
	row := func() (string, time.Time) {
		t.Helper()
		var xmin string
		var at time.Time
		if err := conn.QueryRow(ctx, `SELECT xmin::text, at FROM write_probe`).Scan(&xmin, &at); err != nil {
			t.Fatal(err)
		}
		return xmin, at
	}
	if err := st.ProbeWrite(ctx); err != nil {
		t.Fatalf("probe once writes work: %v", err)
	}
	written, at := row()
	if !at.Equal(clk.Now()) {
		t.Fatalf("probe stamped %v, want the store's clock %v", at, clk.Now())
	}
	clk.Advance(time.Second - time.Millisecond)
	for _, s := range []*store.Store{st, other} {
		if err := s.ProbeWrite(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if x, _ := row(); x != written {
		t.Fatalf("probes within a second of the last wrote the row (version %s, was %s)", x, written)
	}
	clk.Advance(time.Millisecond)
	if err := other.ProbeWrite(ctx); err != nil {
		t.Fatal(err)
	}
	if x, at := row(); x == written || !at.Equal(clk.Now()) {
		t.Fatalf("probe a second later: version %s stamped %v, want a new version stamped %v", x, at, clk.Now())
	}
}
