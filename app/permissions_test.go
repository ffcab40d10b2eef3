package app

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/middleware"
	"sheetq/assets"
	"sheetq/internal/apptest"
	"sheetq/internal/oidctest"
	"sheetq/jobs/export"
	"sheetq/store"
)

// The access model's tests (issue 39; RELIABILITY.md, "People and permissions"): the
// permission matrix over the route table, a member's row-level export, and a member's
// event stream.

// salesReport is open to the sales group only.
const salesReport = `-- title: Sales
-- source: demo
-- access: sales
-- param: rows int "Rows" = 2
SELECT :rows;
`

// The actors of the matrix, in the order of its columns.
const (
	actorAdmin  = iota // the admin token "ops"
	actorSales         // ann, a person in the report's group (sales)
	actorOther         // bob, a person in another group (hr)
	actorBot           // the member token "bot", in sales, not the owner of ann's things
	actorNobody        // no credentials
	actors
)

var actorNames = [actors]string{"admin", "member of the report's group", "member of another group", "member's token", "nobody"}

const (
	opsSecret = "ops-secret-0123456789abcdef"
	botSecret = "bot-secret-0123456789abcdef"
)

// accessServer is a running app with sign-in: tokens ops (admin) and bot (a member of
// sales), [oidc] on a real provider, and [[people]] ann (sales, region North) and bob
// (hr); the sales report in its folder.
type accessServer struct {
	t   *testing.T
	app *App
	c   *apptest.Client
	p   *oidctest.Provider
}

func startAccessServer(t *testing.T, file FileConfig) *accessServer {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	p := oidctest.Start(t, "http://"+hs.Listener.Addr().String()+"/auth/callback")
	file.OIDC = OIDCConfig{Issuer: p.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret}
	file.Tokens = append(file.Tokens,
		TokenConfig{Name: "ops", Token: opsSecret},
		TokenConfig{Name: "bot", Token: botSecret, Role: "member", Groups: []string{"sales"}, Attrs: map[string]string{"region": "West"}})
	file.People = append(file.People,
		PersonConfig{Email: "ann@example.com", Groups: []string{"sales"}, Attrs: map[string]string{"region": "North"}},
		PersonConfig{Email: "bob@example.com", Groups: []string{"hr"}, Attrs: map[string]string{"region": "South"}})
	cfg := testConfig(t, testOpts{})
	cfg.File = &file
	if err := os.MkdirAll(cfg.ReportsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.ReportsDir, "sales.sql"), []byte(salesReport), 0o644); err != nil {
		t.Fatal(err)
	}
	a := serveOn(t, hs, cfg)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &accessServer{t: t, app: a, c: &apptest.Client{T: t, URL: hs.URL, HC: hc}, p: p}
}

// session is a fresh session cookie of the person with email, as a sign-in makes it.
func (s *accessServer) session(email string) string {
	s.t.Helper()
	id := middleware.Identity{Email: email}
	v, _, err := s.app.mw.Auth().NewPersonSession(id)
	if err != nil {
		s.t.Fatal(err)
	}
	// As a sign-in does: the person is seen, so that their schedules fire as them.
	if err := s.app.personSeen(context.Background(), id, s.app.mw.Auth().PersonWho(id)); err != nil {
		s.t.Fatal(err)
	}
	return v
}

// as sets actor's credentials on r: a bearer token, or a person's session cookie (with
// the same-origin headers a browser sends on a form).
func (s *accessServer) as(actor int, r *http.Request) {
	switch actor {
	case actorAdmin:
		r.Header.Set("Authorization", "Bearer "+opsSecret)
	case actorBot:
		r.Header.Set("Authorization", "Bearer "+botSecret)
	case actorSales, actorOther:
		email := map[int]string{actorSales: "ann@example.com", actorOther: "bob@example.com"}[actor]
		r.AddCookie(&http.Cookie{Name: middleware.SessionCookie, Value: s.session(email)})
		r.Header.Set("Origin", s.c.URL)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
}

// do sends method path with body as actor and returns the status and the body (at most
// 64 KiB: a stream is cut off once its headers arrive).
func (s *accessServer) do(actor int, method, path, contentType, body string) (int, string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, method, s.c.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if method == http.MethodGet && !strings.HasPrefix(path, "/api/") {
		r.Header.Set("Accept", "text/html")
	}
	s.as(actor, r)
	res, err := s.c.HC.Do(r)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res.StatusCode, ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, string(b)
}

// annExport is a SUCCEEDED export of the sales report by ann.
func (s *accessServer) annExport() string {
	s.t.Helper()
	code, body := s.do(actorSales, http.MethodPost, "/api/v1/exports", "application/json", `{"report":"sales","params":{"rows":2}}`)
	if code != http.StatusAccepted {
		s.t.Fatalf("ann's export: %d %s", code, body)
	}
	var j struct{ ID string }
	_ = json.Unmarshal([]byte(body), &j)
	apptest.WaitFor(s.t, 20*time.Second, func() (bool, string) {
		got, err := s.app.store.Get(context.Background(), j.ID)
		return err == nil && got.Status == store.StatusSucceeded, fmt.Sprintf("ann's export %s: %s %v", j.ID, got.Status, err)
	})
	return j.ID
}

// annSchedule is a schedule of the sales report by ann.
func (s *accessServer) annSchedule() string {
	s.t.Helper()
	code, body := s.do(actorSales, http.MethodPost, "/api/v1/schedules", "application/json", `{"report":"sales","cron":"0 6 * * *","timezone":"UTC"}`)
	if code != http.StatusCreated {
		s.t.Fatalf("ann's schedule: %d %s", code, body)
	}
	var sc struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sc)
	return sc.ID
}

// matrixCase is one route's entry: the request, with {export} and {schedule} standing
// for ann's (fresh ones when fresh is set, for a request that removes what it names),
// and the status each actor gets.
type matrixCase struct {
	method, path, contentType, body string
	fresh                           bool
	want                            [actors]int
}

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

// statuses is want for every actor in one line: admin, the group's member, another
// group's member, a member's token, nobody.
func statuses(admin, sales, other, bot, nobody int) [actors]int {
	return [actors]int{admin, sales, other, bot, nobody}
}

// permissionMatrix is every route of the server by its pattern in the route table
// (App.patterns); TestPermissionMatrix fails for a route without an entry.
func permissionMatrix() map[string]matrixCase {
	const (
		ok, created, accepted, noContent = 200, 201, 202, 204
		seeOther, found                  = 303, 302
		bad, unauth, forbid, notFound    = 400, 401, 403, 404
		notAllowed, conflict, unproc     = 405, 409, 422
	)
	salesJSON := `{"report":"sales","params":{"rows":2}}`
	schedJSON := `{"report":"sales","cron":"0 6 * * *","timezone":"UTC"}`
	schedForm := url.Values{"report": {"sales"}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}, "rows": {"2"}}.Encode()
	return map[string]matrixCase{
		// The API.
		"POST /api/v1/exports":               {method: "POST", path: "/api/v1/exports", contentType: jsonType, body: salesJSON, want: statuses(accepted, accepted, unproc, accepted, unauth)},
		"GET /api/v1/exports":                {path: "/api/v1/exports", want: statuses(ok, ok, ok, ok, unauth)},
		"GET /api/v1/exports/{id}":           {path: "/api/v1/exports/{export}", want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /api/v1/exports/{id}/file":      {path: "/api/v1/exports/{export}/file", want: statuses(ok, ok, notFound, notFound, unauth)},
		"POST /api/v1/exports/{id}/file":     {method: "POST", path: "/api/v1/exports/{export}/file", contentType: jsonType, body: `{"password":"pw"}`, want: statuses(ok, ok, notFound, notFound, unauth)},
		"POST /api/v1/exports/{id}/cancel":   {method: "POST", path: "/api/v1/exports/{export}/cancel", want: statuses(conflict, conflict, notFound, notFound, unauth)},
		"POST /api/v1/exports/{id}/retry":    {method: "POST", path: "/api/v1/exports/{export}/retry", want: statuses(conflict, conflict, notFound, notFound, unauth)},
		"DELETE /api/v1/exports/{id}":        {method: "DELETE", path: "/api/v1/exports/{export}", fresh: true, want: statuses(noContent, noContent, notFound, notFound, unauth)},
		"GET /api/v1/reports":                {path: "/api/v1/reports", want: statuses(ok, ok, ok, ok, unauth)},
		"POST /api/v1/schedules":             {method: "POST", path: "/api/v1/schedules", contentType: jsonType, body: schedJSON, want: statuses(created, created, unproc, created, unauth)},
		"GET /api/v1/schedules":              {path: "/api/v1/schedules", want: statuses(ok, ok, ok, ok, unauth)},
		"POST /api/v1/schedules/preview":     {method: "POST", path: "/api/v1/schedules/preview", contentType: jsonType, body: schedJSON, want: statuses(ok, ok, unproc, ok, unauth)},
		"GET /api/v1/schedules/{id}":         {path: "/api/v1/schedules/{schedule}", want: statuses(ok, ok, notFound, notFound, unauth)},
		"PATCH /api/v1/schedules/{id}":       {method: "PATCH", path: "/api/v1/schedules/{schedule}", contentType: jsonType, body: `{"cron":"0 7 * * *"}`, want: statuses(ok, ok, notFound, notFound, unauth)},
		"DELETE /api/v1/schedules/{id}":      {method: "DELETE", path: "/api/v1/schedules/{schedule}", fresh: true, want: statuses(noContent, noContent, notFound, notFound, unauth)},
		"POST /api/v1/schedules/{id}/pause":  {method: "POST", path: "/api/v1/schedules/{schedule}/pause", want: statuses(ok, ok, notFound, notFound, unauth)},
		"POST /api/v1/schedules/{id}/resume": {method: "POST", path: "/api/v1/schedules/{schedule}/resume", want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /api/v1/schedules/{id}/exports": {path: "/api/v1/schedules/{schedule}/exports", want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /api/v1/audit":                  {path: "/api/v1/audit", want: statuses(ok, forbid, forbid, forbid, unauth)},
		"GET /api/v1/stats":                  {path: "/api/v1/stats", want: statuses(ok, forbid, forbid, forbid, unauth)},
		"GET /api/v1/openapi.json":           {path: "/api/v1/openapi.json", want: statuses(ok, ok, ok, ok, unauth)},
		"GET /api/v1/events":                 {path: "/api/v1/events?job={export}", want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /metrics":                       {path: "/metrics", want: statuses(ok, forbid, forbid, forbid, unauth)},
		"GET /healthz":                       {path: "/healthz", want: statuses(ok, ok, ok, ok, ok)},
		"GET /readyz":                        {path: "/readyz", want: statuses(ok, ok, ok, ok, ok)},
		"/api/":                              {path: "/api/v1/nothing", want: statuses(notFound, notFound, notFound, notFound, unauth)},
		"/healthz":                           {method: "POST", path: "/healthz", want: statuses(notAllowed, notAllowed, notAllowed, notAllowed, notAllowed)},
		"/readyz":                            {method: "POST", path: "/readyz", want: statuses(notAllowed, notAllowed, notAllowed, notAllowed, notAllowed)},
		"/metrics":                           {method: "POST", path: "/metrics", want: statuses(notAllowed, notAllowed, notAllowed, notAllowed, unauth)},
		"GET /assets/":                       {path: assets.URL("style.css"), want: statuses(ok, ok, ok, ok, ok)},
		"GET /reports/events":                {path: "/reports/events", want: statuses(ok, ok, ok, ok, seeOther)},
		// The pages.
		"GET /{$}":                    {path: "/", want: statuses(ok, ok, ok, ok, seeOther)},
		"GET /exports/new":            {path: "/exports/new?report=sales", want: statuses(ok, ok, notFound, ok, seeOther)},
		"GET /exports/new/estimate":   {path: "/exports/new/estimate?report=sales", want: statuses(ok, ok, notFound, ok, seeOther)},
		"POST /exports":               {method: "POST", path: "/exports", contentType: formType, body: "report=sales&idempotency_key=form-{n}&rows=2", want: statuses(seeOther, seeOther, notFound, seeOther, unauth)},
		"GET /exports/{id}":           {path: "/exports/{export}", want: statuses(ok, ok, notFound, notFound, seeOther)},
		"GET /exports/{id}/row":       {path: "/exports/{export}/row", want: statuses(ok, ok, notFound, notFound, seeOther)},
		"POST /exports/{id}/cancel":   {method: "POST", path: "/exports/{export}/cancel", contentType: formType, want: statuses(seeOther, seeOther, notFound, notFound, unauth)},
		"POST /exports/{id}/retry":    {method: "POST", path: "/exports/{export}/retry", contentType: formType, want: statuses(seeOther, seeOther, notFound, notFound, unauth)},
		"POST /exports/{id}/delete":   {method: "POST", path: "/exports/{export}/delete", contentType: formType, want: statuses(ok, ok, notFound, notFound, unauth)},
		"POST /exports/{id}/file":     {method: "POST", path: "/exports/{export}/file", contentType: formType, body: "password=pw&confirm=pw", want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /exports/{id}/file":      {path: "/exports/{export}/file", want: statuses(seeOther, seeOther, seeOther, seeOther, seeOther)},
		"POST /exports/bulk":          {method: "POST", path: "/exports/bulk", contentType: formType, body: "action=delete&scope=selected&id={export}", fresh: true, want: statuses(ok, ok, ok, ok, unauth)},
		"GET /reports":                {path: "/reports", want: statuses(ok, ok, ok, ok, seeOther)},
		"GET /queue":                  {path: "/queue", want: statuses(ok, forbid, forbid, forbid, seeOther)},
		"GET /audit":                  {path: "/audit", want: statuses(ok, forbid, forbid, forbid, seeOther)},
		"GET /schedules":              {path: "/schedules", want: statuses(ok, ok, ok, ok, seeOther)},
		"GET /schedules/new":          {path: "/schedules/new", want: statuses(ok, ok, ok, ok, seeOther)},
		"POST /schedules":             {method: "POST", path: "/schedules", contentType: formType, body: schedForm, want: statuses(seeOther, seeOther, unproc, seeOther, unauth)},
		"POST /schedules/preview":     {method: "POST", path: "/schedules/preview", contentType: formType, body: schedForm, want: statuses(ok, ok, ok, ok, unauth)},
		"GET /schedules/{id}":         {path: "/schedules/{schedule}", want: statuses(ok, ok, notFound, notFound, seeOther)},
		"GET /schedules/{id}/edit":    {path: "/schedules/{schedule}/edit", want: statuses(ok, ok, notFound, notFound, seeOther)},
		"POST /schedules/{id}/edit":   {method: "POST", path: "/schedules/{schedule}/edit", contentType: formType, body: schedForm, want: statuses(seeOther, seeOther, notFound, notFound, unauth)},
		"POST /schedules/{id}/pause":  {method: "POST", path: "/schedules/{schedule}/pause", contentType: formType, want: statuses(seeOther, seeOther, notFound, notFound, unauth)},
		"POST /schedules/{id}/resume": {method: "POST", path: "/schedules/{schedule}/resume", contentType: formType, want: statuses(seeOther, seeOther, notFound, notFound, unauth)},
		"POST /schedules/{id}/delete": {method: "POST", path: "/schedules/{schedule}/delete", contentType: formType, want: statuses(ok, ok, notFound, notFound, unauth)},
		"GET /login":                  {path: "/login", want: statuses(ok, ok, ok, ok, ok)},
		"POST /login":                 {method: "POST", path: "/login", contentType: formType, body: "token=wrong-token-0123456789", want: statuses(unauth, unauth, unauth, unauth, unauth)},
		"POST /logout":                {method: "POST", path: "/logout", contentType: formType, want: statuses(seeOther, seeOther, seeOther, seeOther, seeOther)},
		"GET /auth/login":             {path: "/auth/login", want: statuses(seeOther, seeOther, seeOther, seeOther, seeOther)},
		"GET /auth/callback":          {path: "/auth/callback?state=forged&code=forged", want: statuses(bad, bad, bad, bad, bad)},
		"/":                           {path: "/nothing-here", want: statuses(notFound, notFound, notFound, notFound, seeOther)},
		"GET /exports/bulk":           {path: "/exports/bulk", want: statuses(notAllowed, notAllowed, notAllowed, notAllowed, seeOther)},
		"GET /schedules/preview":      {path: "/schedules/preview", want: statuses(notAllowed, notAllowed, notAllowed, notAllowed, seeOther)},
	}
}

// TestPermissionMatrix: every route of the server, as an admin, a member of the
// report's group, a member of another group, a member's token and nobody, answers the
// status its entry says; a route without an entry (or an entry without a route) fails.
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	s := startAccessServer(t, FileConfig{})
	matrix := permissionMatrix()
	var missing []string
	for _, p := range s.app.patterns {
		if _, ok := matrix[p]; !ok {
			missing = append(missing, p)
		}
	}
	var stale []string
	for p := range matrix {
		if !slices.Contains(s.app.patterns, p) {
			stale = append(stale, p)
		}
	}
	if len(missing) > 0 || len(stale) > 0 {
		slices.Sort(missing)
		slices.Sort(stale)
		t.Fatalf("routes without a permission entry: %q; entries without a route: %q", missing, stale)
	}
	export, schedule := s.annExport(), s.annSchedule()
	// The failed sign-ins (a wrong token, a forged callback) go last: ten of them lock
	// the address out (RELIABILITY.md, brute force), which would answer what follows.
	order := slices.Sorted(maps.Keys(matrix))
	last := []string{"GET /auth/callback", "POST /login", "POST /logout"}
	order = append(slices.DeleteFunc(order, func(p string) bool { return slices.Contains(last, p) }), last...)
	n := 0
	for _, pattern := range order {
		tc := matrix[pattern]
		for actor := range actors {
			n++
			exp, sched := export, schedule
			if tc.fresh {
				exp, sched = s.annExport(), s.annSchedule()
			}
			r := strings.NewReplacer("{export}", exp, "{schedule}", sched, "{n}", fmt.Sprint(n))
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			code, body := s.do(actor, method, r.Replace(tc.path), tc.contentType, r.Replace(tc.body))
			if code != tc.want[actor] {
				t.Errorf("%s as %s: %d, want %d\n%.300s", pattern, actorNames[actor], code, tc.want[actor], body)
			}
		}
	}
}

// TestMembersKeysAreTheirOwn: two members sending one Idempotency-Key each get an export
// of their own; each replay gives its sender's.
func TestMembersKeysAreTheirOwn(t *testing.T) {
	t.Parallel()
	s := startAccessServer(t, FileConfig{})
	send := func(actor int) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.c.URL+"/api/v1/exports", strings.NewReader(`{"report":"sales"}`))
		r.Header.Set("Content-Type", jsonType)
		r.Header.Set("Idempotency-Key", "shared-key-1")
		s.as(actor, r)
		res, err := s.c.HC.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var j struct {
			ID        string `json:"id"`
			CreatedBy string `json:"created_by"`
		}
		if err := json.NewDecoder(res.Body).Decode(&j); err != nil || j.ID == "" {
			t.Fatalf("%s: %d %v", actorNames[actor], res.StatusCode, err)
		}
		return j.ID + " " + j.CreatedBy
	}
	ann, bot := send(actorSales), send(actorBot)
	if ann == bot || !strings.HasSuffix(ann, "ann@example.com") || !strings.HasSuffix(bot, " bot") {
		t.Fatalf("one key from two members: %q and %q, want an export each", ann, bot)
	}
	if again := send(actorSales); again != ann {
		t.Errorf("ann's replay: %q, want her export %q", again, ann)
	}
}

// regionalReport takes the region from the person running it.
const regionalReport = `-- title: My region's orders
-- source: shop
-- access: sales
-- param: region text "Region" from=person.region
SELECT id, region, total FROM orders WHERE region = :region ORDER BY id;
`

// TestRowLevelExport: a member's export of a report with from=person.region holds only
// the rows of their region (ann North, the member token bot West); a request that gives
// the region is 422 invalid_param; someone without the attribute (carol, or the admin
// token) is refused with 403 naming it, and the form shows ann's region read-only.
func TestRowLevelExport(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "shop.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, region TEXT, total REAL);
		INSERT INTO orders (region, total) VALUES ('North', 1), ('South', 2), ('North', 3), ('West', 4), ('South', 5), ('North', 6);`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	s := startAccessServer(t, FileConfig{
		Sources: map[string]export.SourceConfig{"shop": {Driver: "sqlite", Path: db}},
		People:  []PersonConfig{{Email: "carol@example.com", Groups: []string{"sales"}}},
	})
	if err := os.WriteFile(filepath.Join(s.app.cfg.ReportsDir, "regional.sql"), []byte(regionalReport), 0o644); err != nil {
		t.Fatal(err)
	}
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		_, err := s.app.kind.catalog.Report("regional")
		return err == nil, fmt.Sprintf("regional not loaded: %v", err)
	})

	rowsOf := func(actor int) [][]string {
		t.Helper()
		code, body := s.do(actor, http.MethodPost, "/api/v1/exports", jsonType, `{"report":"regional"}`)
		if code != http.StatusAccepted {
			t.Fatalf("%s's export: %d %s", actorNames[actor], code, body)
		}
		var j struct{ ID string }
		_ = json.Unmarshal([]byte(body), &j)
		apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
			got, err := s.app.store.Get(context.Background(), j.ID)
			return err == nil && got.Status.Final(), fmt.Sprintf("%s: %s %v", j.ID, got.Status, err)
		})
		code, file := s.do(actor, http.MethodGet, "/api/v1/exports/"+j.ID+"/file", "", "")
		if code != http.StatusOK {
			t.Fatalf("%s's file: %d %.300s", actorNames[actor], code, file)
		}
		return sheetRows(t, []byte(file))
	}
	for actor, want := range map[int][]string{actorSales: {"1", "3", "6"}, actorBot: {"4"}} {
		rows := rowsOf(actor)
		var ids []string
		for _, row := range rows[1:] {
			if len(row) < 2 || row[1] != map[int]string{actorSales: "North", actorBot: "West"}[actor] {
				t.Errorf("%s's file has a row of another region: %q", actorNames[actor], row)
			}
			ids = append(ids, row[0])
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s's file: orders %q, want %q", actorNames[actor], ids, want)
		}
	}

	code, body := s.do(actorSales, http.MethodPost, "/api/v1/exports", jsonType, `{"report":"regional","params":{"region":"South"}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"param":"region"`) || !strings.Contains(body, "invalid_param") {
		t.Errorf("ann giving the region: %d %s, want 422 invalid_param naming region", code, body)
	}
	carol := s.session("carol@example.com")
	r, _ := http.NewRequest(http.MethodPost, s.c.URL+"/api/v1/exports", strings.NewReader(`{"report":"regional"}`))
	r.Header.Set("Content-Type", jsonType)
	r.AddCookie(&http.Cookie{Name: middleware.SessionCookie, Value: carol})
	r.Header.Set("Origin", s.c.URL)
	res, err := s.c.HC.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"code":"forbidden"`) || !strings.Contains(string(b), "region") {
		t.Errorf("carol, without a region: %d %s, want 403 forbidden naming the attribute", res.StatusCode, b)
	}
	if code, body := s.do(actorAdmin, http.MethodPost, "/api/v1/exports", jsonType, `{"report":"regional"}`); code != http.StatusForbidden {
		t.Errorf("the admin token, without a region: %d %s, want 403", code, body)
	}

	code, page := s.do(actorSales, http.MethodGet, "/exports/new?report=regional", "", "")
	if code != http.StatusOK {
		t.Fatalf("ann's form: %d", code)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	field := apptest.TID(doc, "param-region")
	if _, disabled := field.Attr("disabled"); field.AttrOr("value", "") != "North" || !disabled || field.AttrOr("name", "") != "" {
		t.Errorf("the form's region field: value %q, disabled %v, name %q; want ann's North, read-only and never sent",
			field.AttrOr("value", ""), disabled, field.AttrOr("name", ""))
	}
}

// TestMembersEventStream: a member's event stream carries their own exports' events and
// progress, never another's: bob's stream sees his export end, which came after ann's
// export, and nothing of ann's; ann's sees hers; following ann's export by ?job= is 404
// for bob.
func TestMembersEventStream(t *testing.T) {
	t.Parallel()
	s := startAccessServer(t, FileConfig{})
	type stream struct {
		lines chan string
		stop  context.CancelFunc
	}
	open := func(actor int) stream {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		r, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.c.URL+"/api/v1/events", nil)
		r.Header.Set("Accept", "text/event-stream")
		s.as(actor, r)
		res, err := s.c.HC.Do(r)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s's stream: %v %v", actorNames[actor], res, err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		return stream{lines: lines, stop: cancel}
	}
	// until reads st until a data line holds want, and returns every line read.
	until := func(st stream, who string, want ...string) []string {
		t.Helper()
		var seen []string
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-st.lines:
				if !ok {
					t.Fatalf("%s's stream ended before %q", who, want)
				}
				seen = append(seen, l)
				if strings.HasPrefix(l, "data:") && !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(l, w) }) {
					return seen
				}
			case <-deadline:
				t.Fatalf("%s's stream: no data line with %q in 20 s; read:\n%s", who, want, strings.Join(seen, "\n"))
			}
		}
	}
	ann, bob := open(actorSales), open(actorOther)
	annJob := s.annExport()
	code, body := s.do(actorOther, http.MethodPost, "/api/v1/exports", jsonType, `{"report":"demo","params":{"rows":2}}`)
	if code != http.StatusAccepted {
		t.Fatalf("bob's export: %d %s", code, body)
	}
	var bobJob struct{ ID string }
	_ = json.Unmarshal([]byte(body), &bobJob)
	for _, l := range until(bob, "bob", bobJob.ID, `"status":"SUCCEEDED"`) {
		if strings.Contains(l, annJob) {
			t.Fatalf("bob's stream carried ann's export: %s", l)
		}
	}
	until(ann, "ann", annJob, `"status":"SUCCEEDED"`)
	if code, _ := s.do(actorOther, http.MethodGet, "/api/v1/events?job="+annJob, "", ""); code != http.StatusNotFound {
		t.Errorf("bob following ann's export: %d, want 404", code)
	}
}

// TestUnauditedActionsAreRefused: while the audit log cannot be written (a trigger makes
// every insert into it fail, which is no fault of the disk), an export request, a
// download, a cancel, a retry, a deletion and a schedule change are each refused with
// 503 audit_unavailable and not done; once it can be written again they are.
func TestUnauditedActionsAreRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	done := ts.Create(`{"report":"demo","params":{"rows":2}}`)
	ts.WaitStatus(done.ID, store.StatusSucceeded)
	sc := ts.Schedule(http.MethodPost, "/api/v1/schedules", `{"report":"demo","cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)

	// It waits for the server's writer (a sweep, a heartbeat) instead of failing busy.
	db, err := sql.Open("sqlite", "file:"+ts.dir.DB()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'the audit log refuses'); END`); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, res apptest.Response) {
		t.Helper()
		t.Logf("%s", what)
		apptest.CheckProblem(t, res, http.StatusServiceUnavailable, "audit_unavailable")
	}
	json := http.Header{"Content-Type": {"application/json"}}
	refused("an export request", ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo"}`), json))
	refused("a download", ts.Request(http.MethodGet, "/api/v1/exports/"+done.ID+"/file", nil, nil))
	refused("a retry", ts.Request(http.MethodPost, "/api/v1/exports/"+done.ID+"/retry", nil, nil))
	refused("a cancel", ts.Request(http.MethodPost, "/api/v1/exports/"+done.ID+"/cancel", nil, nil))
	refused("a deletion", ts.Request(http.MethodDelete, "/api/v1/exports/"+done.ID, nil, nil))
	refused("a schedule change", ts.Request(http.MethodPatch, "/api/v1/schedules/"+sc.ID, strings.NewReader(`{"cron":"0 7 * * *"}`), json))
	refused("a schedule deletion", ts.Request(http.MethodDelete, "/api/v1/schedules/"+sc.ID, nil, nil))

	if page := ts.List(""); len(page.Exports) != 1 {
		t.Errorf("%d exports after the refused request, want the one before it", len(page.Exports))
	}
	if j, _ := ts.Job(done.ID); j.Status != string(store.StatusSucceeded) {
		t.Errorf("the export after the refused actions: %s, want it SUCCEEDED as it was", j.Status)
	}
	if got, err := ts.store.GetSchedule(context.Background(), sc.ID); err != nil || got.Cron != "0 6 * * *" {
		t.Errorf("the schedule after the refused change: %+v, %v", got, err)
	}

	if _, err := db.Exec(`DROP TRIGGER refuse_audit`); err != nil {
		t.Fatal(err)
	}
	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+done.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("the deletion once the log can be written: %d %s", res.StatusCode, res.Body)
	}
	es, err := ts.store.AuditLog(context.Background(), store.AuditFilter{Job: done.ID})
	if err != nil || len(es) != 2 || es[0].Action != "export_deleted" || es[1].Action != "export_requested" {
		t.Fatalf("the export's entries: %+v, %v; want its request and its deletion only", es, err)
	}
}
