package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sheetq/store"
)

// TestCreatedByListPlans: a member's listing of their own exports (ListOptions.CreatedBy)
// reads jobs_claim for the PENDING part and jobs_settled_created_by (migration 0013) for
// the rest, newest first without a sort, and never scans the table: among everyone's
// jobs, one person's are few.
func TestCreatedByListPlans(t *testing.T) {
	s := openBench(t)
	ctx := context.Background()
	for i := range 400 {
		id := fmt.Sprintf("job%04d", i)
		args := fmt.Sprintf(`{"report":"r%d","params":{}}`, i%7)
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: id, Kind: "export", Args: []byte(args), CreatedBy: fmt.Sprintf("p%d", i%40)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := s.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := driverOf(s).w.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    store.ListOptions
		want []string
	}{
		{"own", store.ListOptions{Kind: "export", CreatedBy: "p3"}, []string{"USING INDEX jobs_claim", "USING INDEX jobs_settled_created_by (created_by=?)"}},
		{"own, after a cursor", store.ListOptions{Kind: "export", CreatedBy: "p3", Before: 100}, []string{"USING INDEX jobs_settled_created_by (created_by=? AND rowid<?)"}},
		{"own, canceled", store.ListOptions{Kind: "export", CreatedBy: "p3", Status: store.StatusCanceled}, []string{"USING INDEX jobs_settled_created_by (created_by=?)"}},
		{"own, pending", store.ListOptions{Kind: "export", CreatedBy: "p3", Status: store.StatusPending}, []string{"USING INDEX jobs_claim"}},
		{"own, one report", store.ListOptions{Kind: "export", CreatedBy: "p3", Report: "r3"}, []string{"USING INDEX jobs_claim", "USING INDEX jobs_settled_created_by (created_by=?)"}},
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
			if strings.Contains(plan, "SCAN jobs\n") {
				t.Errorf("plan scans the table:\n%s", plan)
			}
			if tt.o.Status != "" && tt.o.Status != store.StatusPending && strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("plan sorts:\n%s", plan)
			}
			js, err := s.List(ctx, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				if j.CreatedBy != tt.o.CreatedBy {
					t.Fatalf("listed %s, created by %q", j.ID, j.CreatedBy)
				}
			}
		})
	}
}

// TestAuditLogPlans: every filter of the audit log reads its index newest first, with
// no sort, and a page of the whole log reads the table backwards from the cursor.
func TestAuditLogPlans(t *testing.T) {
	s := openBench(t)
	ctx := context.Background()
	for i := range 300 {
		e := store.AuditEntry{Actor: fmt.Sprintf("p%d", i%30), Action: []string{"signin", "export_requested", "forbidden"}[i%3]}
		if i%3 != 0 {
			e.Job = fmt.Sprintf("job%d", i%50)
		}
		if _, err := s.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := driverOf(s).w.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f    store.AuditFilter
		want string
	}{
		{store.AuditFilter{Limit: 50}, "SCAN audit_log"},
		{store.AuditFilter{Before: 100, Limit: 50}, "SEARCH audit_log USING INTEGER PRIMARY KEY (rowid<?)"},
		{store.AuditFilter{Actor: "p3", Limit: 50}, "USING INDEX audit_actor (actor=?)"},
		{store.AuditFilter{Action: "forbidden", Before: 100, Limit: 50}, "USING INDEX audit_action (action=? AND rowid<?)"},
		{store.AuditFilter{Job: "job7", Limit: 50}, "USING INDEX audit_job (job=?)"},
	} {
		q, args := auditQuery(tt.f)
		plan := explain(t, driverOf(s).r, q, args...)
		if !strings.Contains(plan, tt.want) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%+v: plan has no %q, or sorts:\n%s", tt.f, tt.want, plan)
		}
	}
	// Pruning finds the oldest entries through audit_at.
	plan := explain(t, driverOf(s).r, `SELECT seq FROM audit_log WHERE at < ? ORDER BY at LIMIT ?`, 0, 10)
	if !strings.Contains(plan, "USING INDEX audit_at") && !strings.Contains(plan, "USING COVERING INDEX audit_at") {
		t.Errorf("prune plan:\n%s", plan)
	}
}
