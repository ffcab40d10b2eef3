package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/app/web"
	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/storetest"
)

// auditServer is the pages with the audit log over real parts, on a store clock the
// test sets. A request's identity is the header X-Test-As ("member:NAME" or
// "admin:NAME"; none is the local admin), set by a wrapper inside the middleware, where
// the sign-in will set it.
type auditServer struct {
	*apptest.Client
	store *store.Store
	clock *storetest.Clock
}

func newAuditServer(t *testing.T) *auditServer {
	t.Helper()
	clk := storetest.ClockAt(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	p := apptest.NewParts(t, apptest.Options{Open: openStore, Now: clk.Now})
	var pages *web.Pages
	mw := p.Middleware("", middleware.Config{
		Refused: func(w http.ResponseWriter, r *http.Request, status int, title, message string) {
			pages.RenderError(w, r, status, title, message)
		}})
	log := audit.New(p.Store, p.Log)
	problems := p.Problems()
	problems.Refused = log.Refused // as the app has it: every 403 on the record
	pages = web.New(web.Config{
		Exports: p.Exports, Catalog: p.Catalog, Gate: p.Engine.Config().Gate, Middleware: mw,
		DataDir: p.Dir.Root, ReportsDir: p.Dir.Reports(), Version: "test", Log: p.Log,
		Problems: problems, Schedules: p.Schedules, Metrics: p.Metrics, Audit: log,
	})
	mux := http.NewServeMux()
	pages.Routes(mux)
	asWho := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role, name, ok := strings.Cut(r.Header.Get("X-Test-As"), ":"); ok {
			r = r.WithContext(access.With(r.Context(), access.Who{Name: name, Kind: access.Person, Role: access.Role(role)}))
		}
		mux.ServeHTTP(w, r)
	})
	return &auditServer{Client: apptest.Serve(t, mw.Wrap(asWho, nil)), store: p.Store, clock: clk}
}

func (s *auditServer) add(t *testing.T, e store.AuditEntry) {
	t.Helper()
	if _, err := s.store.Audit(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// TestAuditPageShowsTheLog: the page lists the entries newest first with their times in
// the viewer's zone, filters them by who, action and export with a GET form, pages
// back with Older (and forward to Newest) keeping the filters, and links the same
// entries as csv; the header links it for admins.
func TestAuditPageShowsTheLog(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	s.add(t, store.AuditEntry{Actor: "ann@example.com", Action: audit.SignIn, IP: "192.0.2.9"})
	s.clock.Advance(time.Minute)
	s.add(t, store.AuditEntry{Actor: "ann@example.com", Action: audit.FileDownloaded, Job: "job-1", Report: "sales", IP: "192.0.2.9",
		Detail: "<b>not bold</b>"})
	for i := range 60 {
		s.clock.Advance(time.Second)
		s.add(t, store.AuditEntry{Actor: "bob", Action: audit.ExportRequested, Job: fmt.Sprint("job-b", i), Report: "hr"})
	}

	berlin := http.Header{"Cookie": {"tz=Europe/Berlin"}}
	doc := apptest.Page(t, s.Request(http.MethodGet, "/audit", nil, berlin), http.StatusOK)
	if apptest.TID(doc, "nav-audit").Length() != 1 {
		t.Error("the header has no Audit link for an admin")
	}
	rows := apptest.TID(doc, "audit-row")
	if rows.Length() != 50 {
		t.Fatalf("%d rows on the first page, want 50", rows.Length())
	}
	if got := apptest.TID(rows.First(), "audit-job-cell").Text(); strings.TrimSpace(got) != "job-b59" {
		t.Errorf("newest row's export %q, want job-b59", got)
	}
	if zone := apptest.TID(doc, "audit-zone").Text(); zone != "(CEST)" {
		t.Errorf("zone %q, want (CEST)", zone)
	}
	if at := apptest.TID(rows.First(), "audit-at").Text(); strings.TrimSpace(at) != "2026-07-01 14:02:00" {
		t.Errorf("newest time %q, want Berlin's 14:02:00", at)
	}
	if href, _ := apptest.TID(doc, "audit-csv").Attr("href"); href != "/api/v1/audit?format=csv" {
		t.Errorf("csv link %q", href)
	}
	if apptest.TID(doc, "audit-newest").Length() != 0 {
		t.Error("the first page links to the newest")
	}
	older, ok := apptest.TID(doc, "audit-older").Attr("href")
	if !ok {
		t.Fatal("a full page has no Older link")
	}
	doc = apptest.Page(t, s.Get(older), http.StatusOK)
	rows = apptest.TID(doc, "audit-row")
	if rows.Length() != 12 || apptest.TID(doc, "audit-older").Length() != 0 || apptest.TID(doc, "audit-newest").Length() != 1 {
		t.Fatalf("second page: %d rows, older %d, newest %d; want 12, none, one", rows.Length(),
			apptest.TID(doc, "audit-older").Length(), apptest.TID(doc, "audit-newest").Length())
	}
	last := rows.Last()
	if who := apptest.TID(last, "audit-who").Text(); who != "ann@example.com" || strings.TrimSpace(apptest.TID(last, "audit-what").Text()) != audit.SignIn ||
		apptest.TID(last, "audit-ip").Text() != "192.0.2.9" {
		t.Errorf("oldest row: %q %q %q", who, apptest.TID(last, "audit-what").Text(), apptest.TID(last, "audit-ip").Text())
	}
	if d := apptest.TID(rows.Eq(10), "audit-detail"); d.Text() != "<b>not bold</b>" || d.Find("b").Length() != 0 {
		t.Errorf("detail not escaped: %q", d.Text())
	}

	// Filters: a GET form; paging keeps them; the csv link has them.
	form := apptest.TID(doc, "audit-filters")
	if m, _ := form.Attr("method"); m != "get" {
		t.Errorf("filters form method %q", m)
	}
	q := url.Values{"actor": {"bob"}, "action": {audit.ExportRequested}}
	doc = apptest.Page(t, s.Get("/audit?"+q.Encode()), http.StatusOK)
	if n := apptest.TID(doc, "audit-row").Length(); n != 50 {
		t.Fatalf("bob's requests: %d rows, want 50", n)
	}
	if v, _ := apptest.TID(doc, "audit-actor").Attr("value"); v != "bob" {
		t.Errorf("actor field %q, want bob", v)
	}
	if v, _ := apptest.TID(doc, "audit-action").Find("option[selected]").Attr("value"); v != audit.ExportRequested {
		t.Errorf("selected action %q", v)
	}
	if n := apptest.TID(doc, "audit-action").Find("option").Length(); n != len(audit.Actions)+1 {
		t.Errorf("%d actions offered, want %d and any", n, len(audit.Actions))
	}
	older, _ = apptest.TID(doc, "audit-older").Attr("href")
	if u, err := url.Parse(older); err != nil || u.Query().Get("actor") != "bob" || u.Query().Get("action") != audit.ExportRequested || u.Query().Get("cursor") == "" {
		t.Fatalf("older link %q loses the filters", older)
	}
	doc = apptest.Page(t, s.Get(older), http.StatusOK)
	if n := apptest.TID(doc, "audit-row").Length(); n != 10 {
		t.Errorf("bob's older requests: %d rows, want 10", n)
	}
	csvURL, _ := apptest.TID(doc, "audit-csv").Attr("href")
	if u, err := url.Parse(csvURL); err != nil || u.Path != "/api/v1/audit" || u.Query().Get("format") != "csv" || u.Query().Get("actor") != "bob" ||
		u.Query().Get("cursor") != "" {
		t.Errorf("csv link %q", csvURL)
	}
	doc = apptest.Page(t, s.Get("/audit?job=job-1"), http.StatusOK)
	if rows := apptest.TID(doc, "audit-row"); rows.Length() != 1 || strings.TrimSpace(apptest.TID(rows, "audit-report").Text()) != "sales" {
		t.Errorf("job-1: %d rows", rows.Length())
	}
	doc = apptest.Page(t, s.Get("/audit?actor=nobody"), http.StatusOK)
	if apptest.TID(doc, "audit-empty").Length() != 1 || apptest.TID(doc, "audit-clear").Length() != 1 {
		t.Error("no entries: no empty notice or no way to clear the filters")
	}
	apptest.Page(t, s.Get("/audit?action=dance"), http.StatusBadRequest)
	apptest.Page(t, s.Get("/audit?cursor=%21"), http.StatusBadRequest)
}

// TestAuditPageIsForAdmins: a member gets the 403 page, the header has no Audit link
// for them, and the refusal is on the record.
func TestAuditPageIsForAdmins(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	member := http.Header{"X-Test-As": {"member:mia@example.com"}}
	doc := apptest.Page(t, s.Request(http.MethodGet, "/audit", nil, member), http.StatusForbidden)
	if !strings.Contains(apptest.TID(doc, "page-error").Text(), "admins") {
		t.Errorf("403 page says %q", apptest.TID(doc, "page-error").Text())
	}
	if apptest.TID(doc, "nav-audit").Length() != 0 {
		t.Error("a member's header links the Audit page")
	}
	doc = apptest.Page(t, s.Request(http.MethodGet, "/", nil, member), http.StatusOK)
	if apptest.TID(doc, "nav-audit").Length() != 0 {
		t.Error("a member's header links the Audit page")
	}
	es, err := s.store.AuditLog(context.Background(), store.AuditFilter{})
	if err != nil || len(es) != 1 || es[0].Actor != "mia@example.com" || es[0].Action != audit.Forbidden {
		t.Fatalf("the refusal on the record: %+v, %v", es, err)
	}
	doc = apptest.Page(t, s.Request(http.MethodGet, "/audit", nil, http.Header{"X-Test-As": {"admin:root@example.com"}}), http.StatusOK)
	if apptest.TID(doc, "audit-row").Length() != 1 || apptest.TID(doc, "nav-audit").Length() != 1 {
		t.Error("an admin does not see the refusal, or has no Audit link")
	}
}
