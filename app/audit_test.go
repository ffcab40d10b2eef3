package app

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// TestAuditWiring: the app serves the audit log on GET /api/v1/audit and the Audit
// page, and, once started, prunes the entries older than --audit-keep while keeping the
// rest; Stop ends the pruning.
func TestAuditWiring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, testOpts{})
	cfg.AuditKeep = 30 * 24 * time.Hour
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	now := a.store.Now()
	for i, age := range []time.Duration{90 * 24 * time.Hour, 31 * 24 * time.Hour, 29 * 24 * time.Hour, 0} {
		if _, err := a.store.Audit(ctx, store.AuditEntry{Actor: "ann", Action: "signin", At: now.Add(-age), Detail: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		es, err := a.store.AuditLog(ctx, store.AuditFilter{})
		if err != nil {
			return false, err.Error()
		}
		return len(es) == 2 && es[0].Detail == "3" && es[1].Detail == "2", fmt.Sprintf("%d entries left", len(es))
	})
	c := apptest.Serve(t, a.Handler())
	if res := c.Get("/api/v1/audit?actor=ann"); res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/audit: %d %s", res.StatusCode, res.Body)
	}
	doc := apptest.Page(t, c.Get("/audit"), http.StatusOK)
	if n := apptest.TID(doc, "audit-row").Length(); n != 2 {
		t.Fatalf("the Audit page shows %d entries, want 2", n)
	}
	a.Stop() // returns: the pruning ended
}
