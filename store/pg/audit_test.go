package pg_test

import (
	"strings"
	"testing"

	"sheetq/store"
	"sheetq/store/pg"
)

// TestCreatedByListPlans: a member's listing of their own exports (ListOptions.CreatedBy)
// reads jobs_final_created_by (migration 0012) for the finished jobs and jobs_claim and
// jobs_running for the rest, in the custom and the generic plan, among 20,000 jobs of
// 50 people: it never scans the table.
func TestCreatedByListPlans(t *testing.T) {
	st, conn := storeWithConn(t)
	fillJobs(t, conn, 20_000)
	if _, err := conn.Exec(ctx, `UPDATE jobs SET created_by = 'p' || (seq % 50)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	checkListPlans(t, st, conn, []listPlan{
		{"own", store.ListOptions{Kind: "export", CreatedBy: "p3"}, []string{"jobs_final_created_by", "jobs_claim", "jobs_running"}, true},
		{"own, after a cursor", store.ListOptions{Kind: "export", CreatedBy: "p3", Before: 15_000}, []string{"jobs_final_created_by"}, true},
		{"own, one report", store.ListOptions{Kind: "export", CreatedBy: "p3", Report: "r3"}, []string{"jobs_claim", "jobs_running"}, true},
		{"own, pending", store.ListOptions{Kind: "export", CreatedBy: "p3", Status: store.StatusPending}, []string{"jobs_claim"}, true},
		{"own, canceled", store.ListOptions{Kind: "export", CreatedBy: "p3", Status: store.StatusCanceled}, nil, true},
	})
}

// TestAuditLogPlans: every filter of the audit log reads its index (migration 0012)
// among 20,000 entries, in the plan made for its values (AuditLog runs an unnamed
// statement, planned at each run): no scan of the table.
func TestAuditLogPlans(t *testing.T) {
	_, conn := storeWithConn(t)
	if _, err := conn.Exec(ctx, `INSERT INTO audit_log (at, actor, action, job)
		SELECT now() - (20000 - i) * interval '1 second', 'p' || (i % 40),
			CASE WHEN i % 200 = 0 THEN 'signin_failed'
				ELSE (ARRAY['signin', 'export_requested', 'file_downloaded', 'forbidden'])[i % 4 + 1] END,
			CASE WHEN i % 4 = 0 THEN '' ELSE 'job' || (i % 500) END
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE audit_log`); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			f    store.AuditFilter
			want string
		}{
			{store.AuditFilter{Limit: 50}, "audit_log_pkey"},
			{store.AuditFilter{Before: 15_000, Limit: 50}, "audit_log_pkey"},
			{store.AuditFilter{Actor: "p3", Limit: 50}, "audit_actor"},
			// A rare action: a common one is as well read from the newest entries.
			{store.AuditFilter{Action: "signin_failed", Before: 15_000, Limit: 50}, "audit_action"},
			{store.AuditFilter{Job: "job7", Limit: 50}, "audit_job"},
		} {
			q, args := pg.AuditQuery(tt.f)
			plan := explain(t, conn, q, args...)
			if !strings.Contains(plan, tt.want) || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s %+v: plan has no %q, or scans:\n%s", mode, tt.f, tt.want, plan)
			}
		}
	}
}
