package api_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/app/access"
	"sheetq/app/api"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/store"
)

// auditServer is the API with its audit log over real parts. A request's identity is
// the header X-Test-As ("member:NAME" or "admin:NAME"; none is the local admin), set by
// a wrapper inside the middleware, where the sign-in will set it.
type auditServer struct {
	*apptest.Client
	log   *audit.Log
	store *store.Store
}

func newAuditServer(t *testing.T) *auditServer {
	t.Helper()
	p := apptest.NewParts(t, apptest.Options{Open: openStore})
	mw := p.Middleware("", middleware.Config{})
	l := audit.New(p.Store, p.Log)
	problems := p.Problems()
	problems.Refused = l.Refused // as the app has it: every 403 on the record
	a := api.New(api.Config{
		Exports: p.Exports, Catalog: p.Catalog, Gate: p.Engine.Config().Gate, Middleware: mw,
		Metrics: p.Metrics, DataDir: p.Dir.Root, ExportsDir: p.Dir.Exports(), Version: "test", Log: p.Log,
		Problems: problems, Audit: l,
	})
	mux := http.NewServeMux()
	a.Routes(mux)
	return &auditServer{Client: apptest.Serve(t, mw.Wrap(asWho(mux), nil)), log: l, store: p.Store}
}

// asWho sets the identity X-Test-As names.
func asWho(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role, name, ok := strings.Cut(r.Header.Get("X-Test-As"), ":"); ok {
			r = r.WithContext(access.With(r.Context(), access.Who{Name: name, Kind: access.Token, Role: access.Role(role)}))
		}
		next.ServeHTTP(w, r)
	})
}

func (s *auditServer) page(t *testing.T, query string) apiv1.AuditPage {
	t.Helper()
	res := s.Get("/api/v1/audit" + query)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/audit%s: %d %s %s", query, res.StatusCode, res.Header.Get("Content-Type"), res.Body)
	}
	var p apiv1.AuditPage
	if err := json.Unmarshal(res.Body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// seed writes n entries, oldest first, of three actors, four actions and two jobs, and
// returns them newest first as the API shows them.
func (s *auditServer) seed(t *testing.T, n int) []apiv1.AuditEntry {
	t.Helper()
	actions := []string{audit.SignIn, audit.ExportRequested, audit.FileDownloaded, audit.Forbidden}
	var out []apiv1.AuditEntry
	for i := range n {
		e, err := s.store.Audit(context.Background(), store.AuditEntry{
			Actor: []string{"ann@example.com", "bob", "cid"}[i%3], Action: actions[i%4],
			Job: []string{"", "job-a", "job-b"}[i%3*(i%2)], Report: "sales", IP: "192.0.2.1", Detail: fmt.Sprint("entry ", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		out = slices.Insert(out, 0, apiv1.AuditEntry{At: e.At, Actor: e.Actor, Action: e.Action, Job: e.Job,
			Report: e.Report, IP: e.IP, Detail: e.Detail})
	}
	return out
}

// TestAuditAPIFiltersAndPaging: newest first; each filter and their combination keep what
// equals them; a full page has a next_cursor, and following the cursors neither skips
// nor repeats an entry, and the last page has none.
func TestAuditAPIFiltersAndPaging(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	all := s.seed(t, 30)
	keep := func(f func(apiv1.AuditEntry) bool) []apiv1.AuditEntry {
		out := []apiv1.AuditEntry{}
		for _, e := range all {
			if f(e) {
				out = append(out, e)
			}
		}
		return out
	}
	same := func(a, b []apiv1.AuditEntry) bool {
		return slices.EqualFunc(a, b, func(x, y apiv1.AuditEntry) bool {
			return x.At.Equal(y.At) && x.Detail == y.Detail && x.Actor == y.Actor
		})
	}
	for _, c := range []struct {
		query string
		want  []apiv1.AuditEntry
	}{
		{"", all},
		{"?actor=ann%40example.com", keep(func(e apiv1.AuditEntry) bool { return e.Actor == "ann@example.com" })},
		{"?action=forbidden", keep(func(e apiv1.AuditEntry) bool { return e.Action == audit.Forbidden })},
		{"?job=job-a", keep(func(e apiv1.AuditEntry) bool { return e.Job == "job-a" })},
		{"?actor=bob&action=export_requested", keep(func(e apiv1.AuditEntry) bool { return e.Actor == "bob" && e.Action == audit.ExportRequested })},
		{"?actor=cid&job=job-b&action=file_downloaded", keep(func(e apiv1.AuditEntry) bool {
			return e.Actor == "cid" && e.Job == "job-b" && e.Action == audit.FileDownloaded
		})},
		{"?actor=nobody", nil},
	} {
		p := s.page(t, c.query)
		if !same(p.Entries, c.want) || p.NextCursor != "" {
			t.Errorf("%s: %d entries (next %q), want %d", c.query, len(p.Entries), p.NextCursor, len(c.want))
		}
		if p.Entries == nil {
			t.Errorf("%s: entries is null, want []", c.query)
		}
	}
	if p := s.page(t, ""); p.Entries[0].IP != "192.0.2.1" || p.Entries[0].Report != "sales" || p.Entries[0].At.Location() != time.UTC {
		t.Errorf("newest entry %+v", p.Entries[0])
	}
	// Paging, alone and with a filter.
	for _, base := range []string{"?limit=4", "?limit=2&actor=bob"} {
		var got []apiv1.AuditEntry
		q := base
		for range 100 {
			p := s.page(t, q)
			got = append(got, p.Entries...)
			if p.NextCursor == "" {
				break
			}
			q = base + "&cursor=" + url.QueryEscape(p.NextCursor)
		}
		want := all
		if strings.Contains(base, "bob") {
			want = keep(func(e apiv1.AuditEntry) bool { return e.Actor == "bob" })
		}
		if !same(got, want) {
			t.Errorf("paging %s: %d entries, want %d", base, len(got), len(want))
		}
	}
}

// TestAuditAPIRefusals: a bad filter, limit, cursor or format, or a parameter given
// twice, is a 400 problem, as the exports' listing answers.
func TestAuditAPIRefusals(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	for query, code := range map[string]string{
		"?limit=0":                        "bad_limit",
		"?limit=1001":                     "bad_limit",
		"?limit=ten":                      "bad_limit",
		"?cursor=%21":                     "bad_cursor",
		"?cursor=" + encodeB64("-5"):      "bad_cursor",
		"?action=dance":                   "bad_action",
		"?format=xml":                     "bad_format",
		"?actor=a&actor=b":                "bad_query",
		"?job=%zz":                        "bad_query",
		"?action=signin&action=forbidden": "bad_query",
	} {
		apptest.CheckProblem(t, s.Get("/api/v1/audit"+query), http.StatusBadRequest, code)
	}
	apptest.CheckProblem(t, s.Request(http.MethodPost, "/api/v1/audit", nil, nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestAuditAPIIsForAdmins: a member is refused with 403 forbidden, in JSON and csv
// alike, and the refusal is itself on the record; an admin token reads the log.
func TestAuditAPIIsForAdmins(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	s.seed(t, 3)
	member := http.Header{"X-Test-As": {"member:mia@example.com"}}
	for _, q := range []string{"", "?format=csv", "?limit=0"} {
		p := apptest.CheckProblem(t, s.Request(http.MethodGet, "/api/v1/audit"+q, nil, member), http.StatusForbidden, "forbidden")
		if !strings.Contains(fmt.Sprint(p["detail"]), "admins") {
			t.Errorf("403 detail %q does not say who may", p["detail"])
		}
	}
	res := s.Request(http.MethodGet, "/api/v1/audit?actor=mia%40example.com", nil, http.Header{"X-Test-As": {"admin:root"}})
	var p apiv1.AuditPage
	if res.StatusCode != http.StatusOK || json.Unmarshal(res.Body, &p) != nil {
		t.Fatalf("admin: %d %s", res.StatusCode, res.Body)
	}
	if len(p.Entries) != 3 || p.Entries[0].Action != audit.Forbidden || p.Entries[0].IP != "127.0.0.1" {
		t.Fatalf("the member's refusals on the record: %+v", p.Entries)
	}
}

// TestAuditAPICSV: ?format=csv and Accept: text/csv stream the whole filtered log, every
// page of it, newest first, after a header row, read back by encoding/csv; a text that
// a spreadsheet would run as a formula starts with a quote.
func TestAuditAPICSV(t *testing.T) {
	t.Parallel()
	s := newAuditServer(t)
	ctx := context.Background()
	tricky := []string{"=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tTab", "\rCR", "plain, \"quoted\"\nnext line"}
	for _, d := range tricky {
		if _, err := s.store.Audit(ctx, store.AuditEntry{Actor: "=cmd|' /C calc'!A0", Action: audit.Forbidden, Detail: d, IP: "::1"}); err != nil {
			t.Fatal(err)
		}
	}
	const many = 2100 // more than two pages of the store's reads
	for i := range many {
		if _, err := s.store.Audit(ctx, store.AuditEntry{Actor: "bob", Action: audit.ExportRequested, Job: fmt.Sprint("job", i)}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(res apptest.Response) [][]string {
		t.Helper()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
			!strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("csv: %d %q %q %s", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"), res.Body)
		}
		rows, err := csv.NewReader(strings.NewReader(string(res.Body))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows[0], []string{"at", "actor", "action", "job", "report", "ip", "detail"}) {
			t.Fatalf("header row %q", rows[0])
		}
		return rows[1:]
	}
	rows := read(s.Get("/api/v1/audit?format=csv&action=forbidden"))
	if len(rows) != len(tricky) {
		t.Fatalf("%d rows of forbidden, want %d", len(rows), len(tricky))
	}
	for i, row := range rows {
		want := tricky[len(tricky)-1-i]
		if strings.ContainsRune("=+-@\t\r", rune(want[0])) {
			want = "'" + want
		}
		if row[6] != want || row[1] != "'=cmd|' /C calc'!A0" || row[5] != "::1" || row[2] != "forbidden" {
			t.Errorf("row %d = %q, want detail %q", i, row, want)
		}
		if _, err := time.Parse(time.RFC3339Nano, row[0]); err != nil {
			t.Errorf("row %d: at %q: %v", i, row[0], err)
		}
	}
	// Accept: text/csv, every page, newest first.
	rows = read(s.Request(http.MethodGet, "/api/v1/audit?actor=bob", nil, http.Header{"Accept": {"text/html, text/csv;q=0.9"}}))
	if len(rows) != many || rows[0][3] != fmt.Sprint("job", many-1) || rows[many-1][3] != "job0" {
		t.Fatalf("%d rows for bob (first %q, last %q), want %d newest first", len(rows), rows[0], rows[len(rows)-1], many)
	}
	// ?format=json wins over Accept.
	p := s.Get("/api/v1/audit?format=json&limit=1")
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("format=json answered %q", p.Header.Get("Content-Type"))
	}
}
