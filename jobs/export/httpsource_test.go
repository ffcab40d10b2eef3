package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/internal/httpapitest"
	"sheetq/jobs"
)

// The http source against internal/httpapitest, a real HTTP server on loopback (so
// every test but the guard's sets allow_private). Rows go to a recording RowWriter, and
// in TestHTTPExportXLSX and TestHTTPMillionRowsXLSX through the real writers.

// httpStyles are the pagination styles, each with its request line (%d: the page size)
// and paginate line.
var httpStyles = []struct{ name, request, paginate string }{
	{"link", "GET link/items?limit=%d", "link"},
	{"next_url", "GET next/items?limit=%d", "next_url .links.next"},
	{"cursor", "GET cursor/items?limit=%d", "cursor .meta.next_cursor cursor"},
	{"page", "GET page/items?limit=%d", "page page"},
	{"offset", "GET offset/items?limit=%d", "offset offset"},
}

// newTestAPI starts the test API, closed at the test's end.
func newTestAPI(t testing.TB, opt httpapitest.Options) *httpapitest.Server {
	t.Helper()
	srv := httpapitest.NewServer(opt)
	t.Cleanup(srv.Close)
	return srv
}

// openTestHTTP opens an http source on srv (allow_private, a rate no test waits for,
// waits between retries of milliseconds), after mod changes its config.
func openTestHTTP(t testing.TB, srv *httpapitest.Server, mod func(*SourceConfig)) *httpSource {
	t.Helper()
	sc := SourceConfig{Driver: "http", BaseURL: srv.URL + "/", AllowPrivate: true, Rate: 10_000}
	if mod != nil {
		mod(&sc)
	}
	src, err := OpenSource("api", sc, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs := src.(*httpSource)
	hs.backoff, hs.maxBackoff, hs.maxRetryAfter = time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	hs.SetLogger(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { hs.Close() })
	return hs
}

// httpTestReport parses an HTTP report file with these lines after "-- source: api".
func httpTestReport(t testing.TB, lines ...string) Report {
	t.Helper()
	rep, err := ParseReport("r/api.sql", []byte("-- source: api\n-- "+strings.Join(lines, "\n-- ")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// styleReport is the report of one pagination style, pageSize rows a page.
func styleReport(t testing.TB, style int, pageSize int) Report {
	s := httpStyles[style]
	return httpTestReport(t, "request: "+fmt.Sprintf(s.request, pageSize), "rows: .data[]", "paginate: "+s.paginate)
}

// wantHTTPRow is row i of the test API as the source sends it.
func wantHTTPRow(i int) []any {
	r := httpapitest.RowAt(i)
	var note, meta any
	if r.Note != nil {
		note = *r.Note
	}
	if r.Meta != nil {
		meta = r.Meta.MetaJSON()
	}
	return []any{r.ID, r.Name, r.Amount, r.Paid, r.Day, note, r.Ref, meta}
}

// wantHTTPColumns are the test API's columns as the source types them.
var wantHTTPColumns = []Column{
	{Name: "id", Type: TypeInt}, {Name: "name", Type: TypeText}, {Name: "amount", Type: TypeNumber},
	{Name: "paid", Type: TypeBool}, {Name: "day", Type: TypeText}, {Name: "note", Type: TypeText},
	{Name: "ref", Type: TypeInt}, {Name: "meta", Type: TypeText},
}

func wantHTTPRows(from, to int) [][]any {
	var out [][]any
	for i := from; i < to; i++ {
		out = append(out, wantHTTPRow(i))
	}
	return out
}

// checkHTTPRows compares rows exactly, types included.
func checkHTTPRows(t *testing.T, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("row %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
}

func TestHTTPPaginationStyles(t *testing.T) {
	t.Parallel()
	const rows, size = 1037, 100 // 11 pages, the last short
	for i, style := range httpStyles {
		t.Run(style.name, func(t *testing.T) {
			t.Parallel()
			srv := newTestAPI(t, httpapitest.Options{Rows: rows})
			src := openTestHTTP(t, srv, nil)
			rec := srcMustStream(t, src, styleReport(t, i, size), nil)
			if !slices.Equal(rec.cols, wantHTTPColumns) || rec.total != -1 {
				t.Fatalf("Begin(%v, %d), want %v, -1", rec.cols, rec.total, wantHTTPColumns)
			}
			checkHTTPRows(t, rec.rows, wantHTTPRows(0, rows))
			// Each page once; page and offset end on an empty page, the others when told.
			pages := 11
			if style.name == "page" || style.name == "offset" {
				pages = 12
			}
			log := srv.Log()
			if len(log) != pages || len(slices.Compact(slices.Sorted(slices.Values(log)))) != pages {
				t.Errorf("requests %v, want %d different ones", log, pages)
			}
		})
	}
}

// A report without a paginate line makes one request.
func TestHTTPOneRequest(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 500})
	rec := srcMustStream(t, openTestHTTP(t, srv, nil), httpTestReport(t, "request: GET page/items?limit=40", "rows: .data[]"), nil)
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 40))
	if srv.Total() != 1 {
		t.Fatalf("requests %v, want one", srv.Log())
	}
}

// Parameters are filled in escaped for where they stand, and the base URL's path is a
// folder the request is relative to.
func TestHTTPRequestEncoding(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{})
	src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.BaseURL = srv.URL + "/echo/v1" }) // no trailing /
	rep := httpTestReport(t,
		"param: name text", "param: q text", "param: n int", "param: x number", "param: on bool", "param: day date",
		"request: POST orders/{name}.json?q={q}&n={n}&x={x}&on={on}&day={day}&fixed=a%20b",
		"rows: .data[]")
	rec := srcMustStream(t, src, rep, map[string]any{
		"name": "a b/c?d", "q": "x&y=z ü", "n": 42, "x": 0.000001, "on": true, "day": "2025-03-01",
	})
	want := [][]any{{"/echo/v1/orders/a%20b%2Fc%3Fd.json", "q=x%26y%3Dz+%C3%BC&n=42&x=0.000001&on=true&day=2025-03-01&fixed=a%20b", "POST"}}
	if !slices.Equal(rec.cols, []Column{{Name: "path", Type: TypeText}, {Name: "query", Type: TypeText}, {Name: "method", Type: TypeText}}) {
		t.Fatalf("columns %v", rec.cols)
	}
	checkHTTPRows(t, rec.rows, want)

	// A path segment of . or .. would leave the path the report names.
	rep = httpTestReport(t, "param: id text", "request: GET orders/{id}", "rows: .data[]")
	_, err := srcStream(t.Context(), t, src, rep, map[string]any{"id": ".."})
	srcJobError(t, err, true, "bad_params")
}

func TestHTTPAuth(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHEETQ_TEST_API_TOKEN", "tok-hunter2")
	cases := []struct {
		name string
		opt  httpapitest.Options
		auth HTTPAuth
		bad  HTTPAuth // wrong credentials
	}{
		{"bearer from env", httpapitest.Options{Bearer: "tok-hunter2"},
			HTTPAuth{Type: "bearer", Token: "env:SHEETQ_TEST_API_TOKEN"}, HTTPAuth{Type: "bearer", Token: "nope"}},
		{"basic from a file", httpapitest.Options{User: "ada", Password: "hunter2"},
			HTTPAuth{Type: "basic", User: "ada", Password: "file:" + filepath.Join(dir, "secret")}, HTTPAuth{Type: "basic", User: "ada", Password: "nope"}},
		{"header", httpapitest.Options{HeaderName: "X-API-Key", HeaderValue: "hunter2"},
			HTTPAuth{Type: "header", Name: "x-api-key", Value: "hunter2"}, HTTPAuth{Type: "header", Name: "X-API-Key", Value: "nope"}},
		{"oauth2 client credentials", httpapitest.Options{ClientID: "sheetq", ClientSecret: "hunter2", RequireScope: "read"},
			HTTPAuth{Type: "oauth2", ClientID: "sheetq", ClientSecret: "hunter2", Scopes: []string{"read"}},
			HTTPAuth{Type: "oauth2", ClientID: "sheetq", ClientSecret: "nope", Scopes: []string{"read"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Rows = 250
			tc.opt.EchoCredentials = true
			srv := newTestAPI(t, tc.opt)
			if tc.auth.Type == "oauth2" {
				tc.auth.TokenURL, tc.bad.TokenURL = srv.URL+"/oauth/token", srv.URL+"/oauth/token"
			}
			rep := styleReport(t, 3, 100) // page style: 3 full pages and an empty one

			// Without credentials: refused, permanently, with the API's words.
			_, err := srcStream(t.Context(), t, openTestHTTP(t, srv, nil), rep, nil)
			je := srcJobError(t, err, true, "upstream_rejected")
			if !strings.Contains(je.Error(), "401 Unauthorized: ") || !strings.Contains(je.Error(), "unauthorized") {
				t.Fatalf("error %q does not give the status and the body's start", je)
			}

			rec := srcMustStream(t, openTestHTTP(t, srv, func(sc *SourceConfig) { sc.Auth = &tc.auth }), rep, nil)
			checkHTTPRows(t, rec.rows, wantHTTPRows(0, 250))
			if tc.auth.Type == "oauth2" && srv.Tokens() != 1 {
				t.Fatalf("%d tokens fetched for 4 pages, want 1: the token is kept", srv.Tokens())
			}

			// Wrong credentials: permanent, and no secret in the message, though the API
			// echoes what it was sent.
			before := srv.Total()
			_, err = srcStream(t.Context(), t, openTestHTTP(t, srv, func(sc *SourceConfig) { sc.Auth = &tc.bad }), rep, nil)
			je = srcJobError(t, err, true, "upstream_rejected")
			if strings.Contains(je.Error(), "nope") || strings.Contains(je.Error(), "YWRhOm5vcGU") {
				t.Fatalf("error %q shows a secret", je)
			}
			if tc.auth.Type != "oauth2" && !strings.Contains(je.Error(), "[redacted]") {
				t.Fatalf("error %q: want the echoed secret redacted", je)
			}
			if tc.auth.Type == "oauth2" {
				if !strings.Contains(je.Error(), "token endpoint answered 401") || srv.Total() != before {
					t.Fatalf("error %q: want the token endpoint's refusal, before any page (%d pages requested)", je, srv.Total()-before)
				}
			}
		})
	}
}

// An OAuth2 token is fetched again once it expires: tokens that live 5 s are within
// the oauth2 package's 10 s margin, so every page needs a new one.
func TestHTTPOAuth2TokenRefreshed(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 30, ClientID: "c", ClientSecret: "s", TokenLifetime: 5 * time.Second})
	src := openTestHTTP(t, srv, func(sc *SourceConfig) {
		sc.Auth = &HTTPAuth{Type: "oauth2", TokenURL: srv.URL + "/oauth/token", ClientID: "c", ClientSecret: "s"}
	})
	rec := srcMustStream(t, src, styleReport(t, 0, 10), nil)
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 30))
	if srv.Tokens() != 3 {
		t.Fatalf("%d tokens for 3 pages of expiring tokens, want 3", srv.Tokens())
	}
}

// An API that echoes the OAuth2 access token it was sent does not get it into the
// export's error.
func TestHTTPAccessTokenRedacted(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"at-9f8e7d6c","token_type":"Bearer","expires_in":3600}`)
			return
		}
		http.Error(w, "forbidden for "+r.Header.Get("Authorization"), http.StatusForbidden)
	}))
	t.Cleanup(api.Close)
	src, err := OpenSource("api", SourceConfig{Driver: "http", BaseURL: api.URL, AllowPrivate: true,
		Auth: &HTTPAuth{Type: "oauth2", TokenURL: api.URL + "/token", ClientID: "a", ClientSecret: "s3cret-client"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = srcStream(t.Context(), t, src, httpTestReport(t, "request: GET items", "rows: .[]"), nil)
	je := srcJobError(t, err, true, "upstream_rejected")
	if strings.Contains(je.Error(), "at-9f8e7d6c") || !strings.Contains(je.Error(), "forbidden for Bearer [redacted]") {
		t.Fatalf("error %q", je)
	}
}

// syncBuffer is a log's destination that tests read while sources write.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The credentials go to base_url's host only: a redirect elsewhere goes without them.
func TestHTTPAuthStaysOnItsHost(t *testing.T) {
	t.Parallel()
	var got []string
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":[{"a":1}]}`)
	}))
	t.Cleanup(other.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "hunter2" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		// 127.0.0.1 and localhost are two origins on one machine.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/moved", http.StatusFound)
	}))
	t.Cleanup(api.Close)
	src, err := OpenSource("api", SourceConfig{Driver: "http", BaseURL: api.URL, AllowPrivate: true,
		Auth: &HTTPAuth{Type: "header", Name: "X-Key", Value: "hunter2"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := srcMustStream(t, src, httpTestReport(t, "request: GET items", "rows: .data[]"), nil)
	if len(rec.rows) != 1 || len(got) != 1 || got[0] != "|" {
		t.Fatalf("rows %v; the other host saw credentials %q", rec.rows, got)
	}
}

// A 429 or 503 waits for its Retry-After, in seconds or as a date (capped), and the
// page is asked again; no other page is.
func TestHTTPRetryAfter(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 500})
	srv.Fail(2, http.StatusTooManyRequests, 2, "1")
	srv.Fail(3, http.StatusServiceUnavailable, 1, time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	srv.Fail(4, http.StatusTooManyRequests, 1, "") // none given: the backoff
	src := openTestHTTP(t, srv, nil)
	src.maxRetryAfter = 50 * time.Millisecond // an hour's Retry-After would stop the test
	start := time.Now()
	rec := srcMustStream(t, src, styleReport(t, 0, 100), nil)
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 500))
	for page, want := range map[int]int{1: 1, 2: 3, 3: 2, 4: 2, 5: 1} {
		if n := srv.Requests(page); n != want {
			t.Errorf("page %d requested %d times, want %d", page, n, want)
		}
	}
	if d := time.Since(start); d > 20*time.Second { // a failure guard, not a timing assertion
		t.Fatalf("took %v: the waits were not capped", d)
	}

	// A page that keeps answering 429 fails the attempt, retryably, with the wait it
	// asked for (capped) for the engine's next attempt.
	srv.Fail(1, http.StatusTooManyRequests, 100, "7")
	src = openTestHTTP(t, srv, nil)
	src.retries, src.maxRetryAfter = 2, time.Millisecond
	_, err := srcStream(t.Context(), t, src, styleReport(t, 0, 100), nil)
	je := srcJobError(t, err, false, "upstream")
	if !strings.Contains(je.Error(), "429 Too Many Requests") || !strings.Contains(je.Error(), "3 tries") || je.RetryAfter != time.Millisecond {
		t.Fatalf("error %q (retry after %v): want the status, the tries and the capped wait", je, je.RetryAfter)
	}
}

// A transient failure (5xx, 408, a broken connection) retries the page, not the export.
func TestHTTPTransientFailureRetriesThePage(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 500})
	srv.Fail(3, http.StatusInternalServerError, 2, "")
	srv.Fail(4, http.StatusBadGateway, 1, "")
	srv.Fail(5, http.StatusRequestTimeout, 1, "")
	var logged syncBuffer
	src := openTestHTTP(t, srv, nil)
	src.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	rec := srcMustStream(t, src, styleReport(t, 2, 100), nil)
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 500))
	if n := strings.Count(logged.String(), "page failed, asking again"); n != 4 || !strings.Contains(logged.String(), "page=3 try=2") {
		t.Errorf("%d retries logged, want 4:\n%s", n, logged.String())
	}
	for page, want := range map[int]int{1: 1, 2: 1, 3: 3, 4: 2, 5: 2} {
		if n := srv.Requests(page); n != want {
			t.Errorf("page %d requested %d times, want %d", page, n, want)
		}
	}

	// Past the retries, the attempt fails retryably, naming the page.
	srv.Fail(2, http.StatusInternalServerError, 100, "")
	src = openTestHTTP(t, srv, nil)
	src.retries = 3
	before := srv.Requests(2)
	_, err := srcStream(t.Context(), t, src, styleReport(t, 2, 100), nil)
	je := srcJobError(t, err, false, "upstream")
	if !strings.Contains(je.Error(), "page 2") || !strings.Contains(je.Error(), "500 Internal Server Error: ") || srv.Requests(2)-before != 4 {
		t.Fatalf("error %q after %d tries of page 2, want 4", je, srv.Requests(2)-before)
	}
}

// Any other 4xx is permanent, with the status and the start of the body; the page is
// asked once.
func TestHTTPClientErrorIsPermanent(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusGone} {
		srv := newTestAPI(t, httpapitest.Options{Rows: 300})
		srv.Fail(2, status, 100, "")
		_, err := srcStream(t.Context(), t, openTestHTTP(t, srv, nil), styleReport(t, 1, 100), nil)
		je := srcJobError(t, err, true, "upstream_rejected")
		want := fmt.Sprintf("source api: page 2 (GET /next/items): the API answered %d %s: ", status, http.StatusText(status))
		if !strings.HasPrefix(je.Error(), want) || !strings.Contains(je.Error(), "page 2 fails on purpose") || srv.Requests(2) != 1 {
			t.Fatalf("error %q (page 2 asked %d times), want it to start %q and quote the body", je, srv.Requests(2), want)
		}
	}
	// A 404 on the first page too (a wrong request line).
	srv := newTestAPI(t, httpapitest.Options{})
	_, err := srcStream(t.Context(), t, openTestHTTP(t, srv, nil), httpTestReport(t, "request: GET nosuch/items", "rows: .data[]"), nil)
	srcJobError(t, err, true, "upstream_rejected")
}

// A body over max_response, a body that is not JSON, and rows that are not objects fail
// the export with a message naming the page.
func TestHTTPBadPages(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 100})
	srv.Oversize(3, 100_000)
	src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.MaxResponse = "16 KiB" })
	_, err := srcStream(t.Context(), t, src, styleReport(t, 3, 10), nil)
	je := srcJobError(t, err, true, "bad_response")
	if !strings.Contains(je.Error(), "page 3") || !strings.Contains(je.Error(), "larger than max_response (16 KiB)") || srv.Requests(3) != 1 {
		t.Fatalf("oversized: %q (page 3 asked %d times)", je, srv.Requests(3))
	}

	srv = newTestAPI(t, httpapitest.Options{Rows: 100})
	srv.Garble(2)
	_, err = srcStream(t.Context(), t, openTestHTTP(t, srv, nil), styleReport(t, 3, 10), nil)
	je = srcJobError(t, err, true, "bad_response")
	if !strings.Contains(je.Error(), "page 2 (GET /page/items) is not JSON (Content-Type text/html): invalid character '<'") {
		t.Fatalf("not JSON: %q", je)
	}

	_, err = srcStream(t.Context(), t, openTestHTTP(t, srv, nil), httpTestReport(t, "request: GET page/items", "rows: .data[].id"), nil)
	je = srcJobError(t, err, true, "bad_response")
	if !strings.Contains(je.Error(), "page 1: row 1 is a number, not an object") {
		t.Fatalf("not objects: %q", je)
	}
	_, err = srcStream(t.Context(), t, openTestHTTP(t, srv, nil), httpTestReport(t, "request: GET page/items", "rows: .rows[]"), nil)
	je = srcJobError(t, err, true, "bad_response")
	if !strings.Contains(je.Error(), "page 1: the rows expression .rows[] fails on it: cannot iterate over: null") {
		t.Fatalf("missing rows: %q", je)
	}
}

// A page slower than the timeout is asked again; one that never answers fails the
// attempt once the retries are spent; a cancel ends a hanging request at once.
func TestHTTPTimeouts(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 300})
	srv.Slow(2, 5*time.Second, 1)
	src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.Timeout = "300ms" })
	rec := srcMustStream(t, src, styleReport(t, 4, 100), nil)
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 300))
	if srv.Requests(2) != 2 || srv.Requests(1) != 1 {
		t.Fatalf("page 2 asked %d times, page 1 %d", srv.Requests(2), srv.Requests(1))
	}

	srv.Hang(3)
	src.retries = 1
	before := srv.Requests(3)
	_, err := srcStream(t.Context(), t, src, styleReport(t, 4, 100), nil)
	je := srcJobError(t, err, false, "upstream")
	if !strings.Contains(je.Error(), "page 3 (GET /offset/items): no answer within 300ms (the source's timeout) (2 tries)") || srv.Requests(3)-before != 2 {
		t.Fatalf("hanging page: %q, asked %d times", je, srv.Requests(3)-before)
	}

	srv2 := newTestAPI(t, httpapitest.Options{})
	srv2.Hang(1)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	hanging, rep := openTestHTTP(t, srv2, nil), styleReport(t, 0, 10)
	go func() {
		done <- hanging.Stream(ctx, Query{Report: rep, Params: map[string]any{}}, &srcRecorder{})
	}()
	select {
	case err := <-done:
		srcJobError(t, err, false, "canceled")
	case <-time.After(10 * time.Second): // a failure guard: the source's own timeout is 30s
		t.Fatal("a canceled export still waits for a hanging page")
	}
}

// Pagination that goes round in a circle, or does not end, fails the export.
func TestHTTPLoopGuard(t *testing.T) {
	t.Parallel()
	for _, style := range []int{0, 1, 2} {
		srv := newTestAPI(t, httpapitest.Options{Rows: 1000})
		srv.Loop()
		_, err := srcStream(t.Context(), t, openTestHTTP(t, srv, nil), styleReport(t, style, 10), nil)
		je := srcJobError(t, err, true, "bad_response")
		// The first request's URL is the request line's, not the API's spelling of
		// page 1: the circle is seen when page 3, page 1 again, names page 2.
		if !strings.Contains(je.Error(), "page 3 names page 2 again as the next one: the API's pagination goes round in a circle") || srv.Total() != 3 {
			t.Fatalf("%s: %q after %d requests", httpStyles[style].name, je, srv.Total())
		}
	}
	srv := newTestAPI(t, httpapitest.Options{Rows: 1000})
	src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.MaxPages = 3 })
	_, err := srcStream(t.Context(), t, src, styleReport(t, 4, 10), nil)
	je := srcJobError(t, err, true, "bad_response")
	if !strings.Contains(je.Error(), "reached page 4, past max_pages (3)") || srv.Total() != 3 {
		t.Fatalf("max pages: %q after %d requests", je, srv.Total())
	}
}

// Loopback is refused unless allow_private, at dial time: by address and by a name that
// resolves to it; nothing reaches the server.
func TestHTTPPrivateAddressGuard(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{})
	u, _ := url.Parse(srv.URL)
	for _, base := range []string{srv.URL, "http://localhost:" + u.Port()} {
		src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.BaseURL, sc.AllowPrivate = base, false })
		_, err := srcStream(t.Context(), t, src, styleReport(t, 0, 10), nil)
		je := srcJobError(t, err, true, "not_allowed")
		if !strings.Contains(je.Error(), "is not a public address; set allow_private = true in [sources.api]") {
			t.Fatalf("%s: %q", base, je)
		}
	}
	if srv.Total() != 0 {
		t.Fatalf("%d requests reached the server", srv.Total())
	}
	// The OAuth2 token endpoint is behind the same guard.
	src := openTestHTTP(t, srv, func(sc *SourceConfig) {
		sc.AllowPrivate = false
		sc.BaseURL = "http://192.0.2.1/" // TEST-NET-1: never dialled, the token comes first
		sc.Auth = &HTTPAuth{Type: "oauth2", TokenURL: srv.URL + "/oauth/token", ClientID: "a", ClientSecret: "b"}
	})
	_, err := srcStream(t.Context(), t, src, styleReport(t, 0, 10), nil)
	if je := srcJobError(t, err, true, "not_allowed"); !strings.Contains(je.Error(), "oauth2 token endpoint's address 127.0.0.1 is not a public address") || srv.Tokens() != 0 {
		t.Fatalf("token endpoint on loopback: %v", je)
	}
}

// One source's rate limit holds for all its exports together.
func TestHTTPRateLimitIsShared(t *testing.T) {
	t.Parallel()
	const rate = 20.0
	srv := newTestAPI(t, httpapitest.Options{Rows: 10_000})
	src := openTestHTTP(t, srv, func(sc *SourceConfig) { sc.Rate = rate })
	rep := styleReport(t, 3, 1) // a row a page
	ctx, cancel := context.WithCancel(t.Context())
	start := time.Now()
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			rec := &srcRecorder{}
			_ = src.Stream(ctx, Query{Report: rep, Params: map[string]any{}}, rec)
			counts[i] = len(rec.rows)
		})
	}
	time.Sleep(time.Second)
	n := srv.Total()
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	// A burst of one, then one request every 1/rate: two limiters would allow twice this.
	if most := 1 + int(rate*elapsed.Seconds()) + 1; n > most {
		t.Fatalf("%d requests in %v at %v per second for the source, want at most %d", n, elapsed, rate, most)
	}
	if counts[0] == 0 || counts[1] == 0 || n < 4 {
		t.Fatalf("rows per export %v, %d requests: both exports should make progress", counts, n)
	}
}

// Keys the first page with rows did not have are left out, with one warning; a page
// without rows ahead of it does not fix the columns.
func TestHTTPColumnsFromTheFirstPageWithRows(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 6})
	rep := httpTestReport(t, "request: GET page/items?limit=1", "rows: .data[]", "paginate: page")
	var warnings []string
	rec := &srcRecorder{}
	q := Query{Report: rep, Params: map[string]any{}, Warn: func(s string) { warnings = append(warnings, s) }}
	if err := openTestHTTP(t, srv, nil).Stream(t.Context(), q, rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.cols) != 7 || slices.ContainsFunc(rec.cols, func(c Column) bool { return c.Name == "meta" }) {
		t.Fatalf("columns %v: want row 0's seven keys", rec.cols)
	}
	for i, row := range rec.rows {
		if !slices.Equal(row, wantHTTPRow(i)[:7]) {
			t.Fatalf("row %d: %v", i, row)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "from page 2 on: meta;") {
		t.Fatalf("warnings %q", warnings)
	}

	// A first page without rows: the columns come from the next one.
	srv2 := newTestAPI(t, httpapitest.Options{Rows: 4})
	rep = httpTestReport(t, "request: GET cursor/items?limit=2&cursor=cm93OjQ", "rows: .data[]",
		`paginate: cursor if .data == [] and .meta.next_cursor == null then "cm93OjA" else .meta.next_cursor end cursor`)
	rec = srcMustStream(t, openTestHTTP(t, srv2, nil), rep, nil)
	if !slices.Equal(rec.cols, wantHTTPColumns) {
		t.Fatalf("columns %v after an empty first page", rec.cols)
	}
	checkHTTPRows(t, rec.rows, wantHTTPRows(0, 4))

	// No rows at all (a first page past the end): the column lines make the header.
	srv3 := newTestAPI(t, httpapitest.Options{Rows: 10})
	rep = httpTestReport(t, "request: GET page/items?page=7", "rows: .data[]", "paginate: page", `column: id "Order" int`, "column: total number")
	rec = srcMustStream(t, openTestHTTP(t, srv3, nil), rep, nil)
	if !slices.Equal(rec.cols, []Column{{Name: "id", Type: TypeText}, {Name: "total", Type: TypeText}}) || rec.total != 0 || len(rec.rows) != 0 {
		t.Fatalf("empty export: Begin(%v, %d), %d rows", rec.cols, rec.total, len(rec.rows))
	}
}

// JSON values become typed cells: integers exact, floats, text for integers beyond
// int64, nested values as compact JSON.
func TestHTTPValueTypes(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"rows":[
			{"i": 9223372036854775807, "big": 123456789012345678901234567890, "f": 1.5, "whole": 2.0, "exp": 1e3, "huge": 1e300, "tiny": -0.1,
			 "b": false, "s": "<a&b>", "n": null, "o": {"z": 1, "a": [1, "x", null]}, "e": [], "eo": {}},
			{"i": -1, "big": 1, "f": 2, "whole": 3, "exp": 2.5, "huge": 1, "tiny": 1, "b": true, "s": "", "n": null, "o": null, "e": [1], "eo": {"k": true}}
		]}`)
	}))
	t.Cleanup(api.Close)
	src, err := OpenSource("api", SourceConfig{Driver: "http", BaseURL: api.URL, AllowPrivate: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := srcMustStream(t, src, httpTestReport(t, "request: GET x", "rows: .rows[]"), nil)
	wantCols := []Column{{Name: "i", Type: TypeInt}, {Name: "big", Type: TypeText}, {Name: "f", Type: TypeNumber}, {Name: "whole", Type: TypeInt},
		{Name: "exp", Type: TypeNumber}, {Name: "huge", Type: TypeNumber}, {Name: "tiny", Type: TypeNumber}, {Name: "b", Type: TypeBool},
		{Name: "s", Type: TypeText}, {Name: "n", Type: TypeText}, {Name: "o", Type: TypeText}, {Name: "e", Type: TypeText}, {Name: "eo", Type: TypeText}}
	if !slices.Equal(rec.cols, wantCols) {
		t.Fatalf("columns\n got %v\nwant %v", rec.cols, wantCols)
	}
	checkHTTPRows(t, rec.rows, [][]any{
		{int64(9223372036854775807), "123456789012345678901234567890", 1.5, int64(2), int64(1000), 1e300, -0.1,
			false, "<a&b>", nil, `{"a":[1,"x",null],"z":1}`, "[]", "{}"},
		{int64(-1), int64(1), int64(2), int64(3), 2.5, int64(1), int64(1), true, "", nil, nil, "[1]", `{"k":true}`},
	})
}

func TestHTTPResumable(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{})
	src := openTestHTTP(t, srv, nil)
	if ok, why := src.Resumable(styleReport(t, 0, 10)); !ok {
		t.Fatalf("an HTTP report is not resumable: %s", why)
	}
	if ok, _ := src.Resumable(srcReport("SELECT 1")); ok {
		t.Fatal("an SQL report on an http source is resumable")
	}
}

// errStopHere stops a stream where a test wants it stopped.
var errStopHere = errors.New("stopped here by the test")

// placeRecorder is a writer that asks the Placer where it stands every `every` rows and,
// after stopAt rows, keeps that token and stops the stream, as a crash would.
type placeRecorder struct {
	srcRecorder
	base   int64 // rows written before this run (a resumed one's From.Rows)
	placer Placer
	every  int64 // 0: only at stopAt
	stopAt int64 // -1: never
	token  json.RawMessage
	asked  int
}

func (r *placeRecorder) place(p Placer) { r.placer = p }

func (r *placeRecorder) ask(rows int64) (json.RawMessage, error) {
	if r.placer == nil {
		return nil, errors.New("Begin before Place")
	}
	r.asked++
	return r.placer(r.base+rows, nil) // the file's rows, not this run's
}

// resumeFrom makes r the writer of a run resumed after rows.
func (r *placeRecorder) resumeFrom(rows int64) *placeRecorder {
	r.base = rows
	return r
}

func (r *placeRecorder) Begin(cols []Column, total int64) error {
	if err := r.srcRecorder.Begin(cols, total); err != nil {
		return err
	}
	if r.stopAt == 0 {
		tok, err := r.ask(0)
		if err != nil {
			return err
		}
		r.token = tok
		return errStopHere
	}
	return nil
}

func (r *placeRecorder) Row(values []any) error {
	if err := r.srcRecorder.Row(values); err != nil {
		return err
	}
	n := int64(len(r.rows))
	if r.every > 0 && n%r.every == 0 {
		if _, err := r.ask(n); err != nil {
			return err
		}
	}
	if n == r.stopAt {
		tok, err := r.ask(n)
		if err != nil {
			return err
		}
		r.token = tok
		return errStopHere
	}
	return nil
}

// An export stopped after k rows and resumed from the token for k, on a new source as
// after a restart, writes exactly the rows an uninterrupted run does: for every style,
// and k at a page boundary, inside a page, 0, and the end.
func TestHTTPResume(t *testing.T) {
	t.Parallel()
	const rows, size = 537, 50 // 11 pages, the last short
	for i, style := range httpStyles {
		t.Run(style.name, func(t *testing.T) {
			t.Parallel()
			srv := newTestAPI(t, httpapitest.Options{Rows: rows})
			rep := styleReport(t, i, size)
			full := srcMustStream(t, openTestHTTP(t, srv, nil), rep, nil)
			checkHTTPRows(t, full.rows, wantHTTPRows(0, rows))
			for _, k := range []int64{0, 1, 49, 50, 51, 100, 123, 499, 500, 536, 537} {
				first := &placeRecorder{every: 7, stopAt: k}
				err := openTestHTTP(t, srv, nil).Stream(t.Context(), Query{Report: rep, Params: map[string]any{}, Place: first.place}, first)
				if !errors.Is(err, errStopHere) {
					t.Fatalf("k=%d: the first run ended with %v", k, err)
				}
				// The token is stored as JSON and read back by another process.
				var stored json.RawMessage
				if err := json.Unmarshal(first.token, &stored); err != nil {
					t.Fatalf("k=%d: token %s is not JSON: %v", k, first.token, err)
				}
				var tok httpToken
				if err := json.Unmarshal(stored, &tok); err != nil {
					t.Fatal(err)
				}
				logged := srv.Total()
				second := (&placeRecorder{every: 11, stopAt: -1}).resumeFrom(k)
				q := Query{Report: rep, Params: map[string]any{}, From: &Position{Rows: k, Token: stored}, Place: second.place}
				if err := openTestHTTP(t, srv, nil).Stream(t.Context(), q, second); err != nil {
					t.Fatalf("k=%d: resumed: %v", k, err)
				}
				if second.begins != 1 || !slices.Equal(second.cols, full.cols) {
					t.Fatalf("k=%d: resumed Begin %d times with %v, want the first run's %v", k, second.begins, second.cols, full.cols)
				}
				checkHTTPRows(t, slices.Concat(first.rows[:k], second.rows), full.rows)
				// The resumed run starts at the token's page: the one holding row k+1, or
				// the last one sent when k ends it.
				log := srv.Log()[logged:]
				if u, _ := url.Parse(tok.URL); len(log) == 0 || log[0] != "GET "+u.RequestURI() {
					t.Fatalf("k=%d: resumed with %v, want first %s", k, log, tok.URL)
				}
				if lo := (tok.Page - 1) * size; k < lo || k > lo+size || tok.Skip != k-lo {
					t.Fatalf("k=%d: token names page %d, row %d of it", k, tok.Page, tok.Skip)
				}
			}
		})
	}
}

// The Placer is asked on the writer's goroutine while the source streams ahead of it
// (the pipe): its answers still resume exactly. Run with -race.
func TestHTTPResumeThroughThePipe(t *testing.T) {
	t.Parallel()
	const rows, size = 20_000, 700
	srv := newTestAPI(t, httpapitest.Options{Rows: rows})
	rep := styleReport(t, 2, size)
	for _, k := range []int64{1234, 7000, 14_000} {
		first := &placeRecorder{every: 97, stopAt: k}
		err := pipedAfter(openTestHTTP(t, srv, nil), 100).Stream(t.Context(), Query{Report: rep, Params: map[string]any{}, Place: first.place}, first)
		if !errors.Is(err, errStopHere) {
			t.Fatalf("k=%d: first run: %v", k, err)
		}
		second := (&placeRecorder{every: 101, stopAt: -1}).resumeFrom(k)
		q := Query{Report: rep, Params: map[string]any{}, From: &Position{Rows: k, Token: first.token}, Place: second.place}
		if err := pipedAfter(openTestHTTP(t, srv, nil), 100).Stream(t.Context(), q, second); err != nil {
			t.Fatalf("k=%d: resumed: %v", k, err)
		}
		checkHTTPRows(t, slices.Concat(first.rows[:k], second.rows), wantHTTPRows(0, rows))
		if first.asked < int(k/97) {
			t.Fatalf("k=%d: the placer was asked %d times", k, first.asked)
		}
	}
}

// A token from another source, or one that does not add up, is refused clearly.
func TestHTTPResumeBadToken(t *testing.T) {
	t.Parallel()
	srv := newTestAPI(t, httpapitest.Options{Rows: 100})
	rep := styleReport(t, 3, 10)
	for _, tc := range []struct {
		rows  int64
		token string
		want  string
	}{
		{5, ``, "the checkpoint has no token"},
		{5, `{"after": 5}`, "names no page"},
		{5, `[1]`, "is not an http source's"},
		{5, `{"url": "https://elsewhere.example/page/items", "page": 1, "skip": 5}`, "is on https://elsewhere.example, not on base_url"},
		{5, fmt.Sprintf(`{"url": %q, "page": 1, "skip": 6}`, srv.URL+"/page/items"), "does not add up"},
		{500, fmt.Sprintf(`{"url": %q, "page": 2, "skip": 20}`, srv.URL+"/page/items?limit=10&page=2"), "page 2 now has 10 rows, but 20 of it were written"},
	} {
		q := Query{Report: rep, Params: map[string]any{}, From: &Position{Rows: tc.rows, Token: json.RawMessage(tc.token)}}
		err := openTestHTTP(t, srv, nil).Stream(t.Context(), q, &srcRecorder{})
		var je *jobs.Error
		if !errors.As(err, &je) || !je.Permanent || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token %s: %v, want a permanent error saying %q", tc.token, err, tc.want)
		}
	}
}

func TestOpenHTTPSourceConfigErrors(t *testing.T) {
	t.Setenv("SHEETQ_TEST_HTTP_EMPTY", "")
	auth := func(a HTTPAuth) SourceConfig {
		return SourceConfig{Driver: "http", BaseURL: "https://api.example.com/v1/", Auth: &a}
	}
	for _, c := range []struct {
		sc   SourceConfig
		want string
	}{
		{SourceConfig{Driver: "http"}, "driver http needs base_url"},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", Path: "a"}, "driver http takes base_url, not path or dsn"},
		{SourceConfig{Driver: "sqlite", Path: "a.db", BaseURL: "https://x/", Rate: 2}, "driver sqlite does not take base_url, rate (the http driver's keys)"},
		{SourceConfig{Driver: "http", BaseURL: "ftp://x/"}, `base_url: "ftp://x/": want an absolute http:// or https:// URL`},
		{SourceConfig{Driver: "http", BaseURL: "api.example.com/v1"}, "want an absolute http:// or https:// URL"},
		{SourceConfig{Driver: "http", BaseURL: "https://ada:hunter2@api.example.com/"}, "base_url: must not hold a user or password: put them in auth"},
		{SourceConfig{Driver: "http", BaseURL: "https://x/v1?key=1"}, "a base_url has no query"},
		{SourceConfig{Driver: "http", BaseURL: "https://x:99999/"}, `bad port "99999"`},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", Rate: -1}, "rate must be a number of requests per second above 0, not -1"},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", Timeout: "soon"}, `timeout "soon": want a duration above 0 and at most 1h0m0s`},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", Timeout: "-1s"}, `timeout "-1s"`},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", MaxResponse: "32MB"}, `max_response "32MB": want a size from 1KiB to 1GiB`},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", MaxResponse: "2GiB"}, `max_response "2GiB"`},
		{SourceConfig{Driver: "http", BaseURL: "https://x/", MaxPages: -1}, "max_pages must be 1 or more"},
		{auth(HTTPAuth{}), "auth: missing type (bearer, basic, header or oauth2)"},
		{auth(HTTPAuth{Type: "digest"}), `auth: unknown type "digest"`},
		{auth(HTTPAuth{Type: "bearer"}), "auth: type bearer needs token"},
		{auth(HTTPAuth{Type: "bearer", Token: "env:SHEETQ_TEST_HTTP_UNSET"}), "auth: token: environment variable SHEETQ_TEST_HTTP_UNSET is not set"},
		{auth(HTTPAuth{Type: "bearer", Token: "env:SHEETQ_TEST_HTTP_EMPTY"}), "is not set"},
		{auth(HTTPAuth{Type: "bearer", Token: "file:no/such/file"}), "auth: token: secret file: open"},
		{auth(HTTPAuth{Type: "bearer", Token: "hunter2\nX-Evil: 1"}), "auth: token is not a valid header value"},
		{auth(HTTPAuth{Type: "bearer", Token: "hunter2", Password: "hunter2"}), "auth: type bearer does not take password"},
		{auth(HTTPAuth{Type: "basic", Password: "hunter2"}), "auth: type basic needs user"},
		{auth(HTTPAuth{Type: "basic", User: "a:b", Password: "hunter2"}), "auth: user must not hold a colon"},
		{auth(HTTPAuth{Type: "basic", User: "ada"}), "auth: type basic needs password"},
		{auth(HTTPAuth{Type: "header", Value: "hunter2"}), "auth: type header needs name"},
		{auth(HTTPAuth{Type: "header", Name: "X Key", Value: "hunter2"}), `auth: name "X Key" is not a header name`},
		{auth(HTTPAuth{Type: "header", Name: "host", Value: "hunter2"}), `auth: name "host" is a header sheetq sets itself`},
		{auth(HTTPAuth{Type: "oauth2", ClientID: "a", ClientSecret: "hunter2"}), "auth: type oauth2 needs token_url"},
		{auth(HTTPAuth{Type: "oauth2", TokenURL: "https://x/token", ClientSecret: "hunter2"}), "auth: type oauth2 needs client_id"},
		{auth(HTTPAuth{Type: "oauth2", TokenURL: "https://u:hunter2@x/token", ClientID: "a", ClientSecret: "hunter2"}), "auth: token_url must be an absolute http:// or https:// URL"},
		{auth(HTTPAuth{Type: "oauth2", TokenURL: "https://x/token", ClientID: "a"}), "auth: type oauth2 needs client_secret"},
	} {
		wantSourceError(t, "crm", c.sc, c.want)
	}
	// A good one, with every key.
	src, err := OpenSource("crm", SourceConfig{Driver: "http", BaseURL: "https://api.example.com/v1", Rate: 2.5,
		Timeout: "5s", MaxResponse: "32MiB", MaxPages: 10, Auth: &HTTPAuth{Type: "bearer", Token: "t"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	hs := src.(*httpSource)
	if hs.base.String() != "https://api.example.com/v1/" || hs.maxResponse != 32<<20 || hs.maxPages != 10 || hs.client.Timeout != 5*time.Second || float64(hs.limiter.Limit()) != 2.5 {
		t.Fatalf("source %+v", hs)
	}
}

// An HTTP report runs on an http source only, and SQL never does: the mismatch is
// refused when the export is asked for.
func TestHTTPReportNeedsAnHTTPSource(t *testing.T) {
	srv := newTestAPI(t, httpapitest.Options{})
	httpRep := styleReport(t, 0, 10)
	sqlRep := srcReport("SELECT 1")
	sqlRep.ID, sqlRep.Source = "sql", "db"
	k := New(Config{Library: libraryOf{httpRep, sqlRep}, Sources: map[string]Source{"api": openTestHTTP(t, srv, nil), "db": &sqlSource{name: "db"}}})
	if _, err := k.Validate(httpRep.ID, nil); err != nil {
		t.Fatalf("HTTP report on an http source: %v", err)
	}
	wrongHTTP := httpRep
	wrongHTTP.ID, wrongHTTP.Source = "h2", "db"
	wrongSQL := sqlRep
	wrongSQL.ID, wrongSQL.Source = "s2", "api"
	k = New(Config{Library: libraryOf{wrongHTTP, wrongSQL}, Sources: map[string]Source{"api": openTestHTTP(t, srv, nil), "db": &sqlSource{name: "db"}}})
	if _, err := k.Validate("h2", nil); err == nil || !strings.Contains(err.Error(), "is not an http source") {
		t.Fatalf("HTTP report on an SQL source: %v", err)
	}
	if _, err := k.Validate("s2", nil); err == nil || !strings.Contains(err.Error(), "is an http source") {
		t.Fatalf("SQL report on an http source: %v", err)
	}
}

// libraryOf is a Library of these reports.
type libraryOf []Report

func (l libraryOf) Report(id string) (Report, error) {
	for _, r := range l {
		if r.ID == id {
			return r, nil
		}
	}
	return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
}

func TestNextLink(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{[]string{`<https://a/x?page=2>; rel="next"`}, "https://a/x?page=2"},
		{[]string{`<https://a/1>; rel="prev", <https://a/3>; rel="next"`}, "https://a/3"},
		{[]string{`<https://a/1>; rel="first"`, `<https://a/3>; rel=next`}, "https://a/3"},
		{[]string{`</x?a=1,2>; title="a, b; c"; rel="last next"`}, "/x?a=1,2"},
		{[]string{`<https://a/3>; REL="Next"`}, "https://a/3"},
		{[]string{`<https://a/3>; rel="nextish"`}, ""},
		{[]string{`<https://a/1>; rel="prev"`}, ""},
		{[]string{`garbage`}, ""},
		{nil, ""},
	} {
		if got := nextLink(tc.values); got != tc.want {
			t.Errorf("nextLink(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		has  bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"-5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999", 24 * time.Hour, true},
	} {
		got, has := retryAfter(tc.v, now)
		if got != tc.want || has != tc.has {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.v, got, has, tc.want, tc.has)
		}
	}
}

func TestSetQueryParam(t *testing.T) {
	for _, tc := range []struct{ raw, key, value, want string }{
		{"", "page", "2", "page=2"},
		{"limit=5", "page", "2", "limit=5&page=2"},
		{"page=1&limit=5", "page", "2", "page=2&limit=5"},
		{"a=x%20y&page=1&page=9", "page", "2", "a=x%20y&page=2"},
		{"cursor=", "cursor", "a b+c", "cursor=a+b%2Bc"},
	} {
		if got := setQueryParam(tc.raw, tc.key, tc.value); got != tc.want {
			t.Errorf("setQueryParam(%q, %q, %q) = %q, want %q", tc.raw, tc.key, tc.value, got, tc.want)
		}
	}
}

// A report's jq sees no environment: $ENV and env are empty, so a report's author
// cannot copy the server's secrets into a file.
func TestHTTPJQSeesNoEnvironment(t *testing.T) {
	t.Setenv("SHEETQ_TEST_JQ_SECRET", "hunter2")
	for _, expr := range []string{"$ENV", "env", "$ENV.SHEETQ_TEST_JQ_SECRET", "env.PATH"} {
		code, err := compileJQ(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		v, err := firstResult(t.Context(), code, nil)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if m, ok := v.(map[string]any); !(v == nil || ok && len(m) == 0) {
			t.Fatalf("%s gives %v", expr, v)
		}
	}
}
