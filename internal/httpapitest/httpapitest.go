// Package httpapitest is a JSON API for tests of HTTP sources: a deterministic dataset of
// rows served with every pagination style sheetq reads, each at a path of its own, and
// knobs that make chosen pages fail, slow, hang, grow or garble, and that count the
// requests each page gets. Tests start it with NewServer; the command in
// cmd/sheetq-testapi serves it as a process of its own for the binary's crash tests. It
// imports nothing of ours, and nothing but tests and that command imports it.
//
// The dataset has Options.Rows rows; row i (from 0) is a function of i alone (Row). A
// page of size L starting at row s is page s/L+1. Paths, each taking limit=L (default
// Options.PageSize):
//
//	/link/items?after=S      the next page in a Link header (rel="next"), path-absolute
//	/next/items?start=S      the next page's URL in the body, .links.next, relative to the page
//	/cursor/items?cursor=C   an opaque cursor in the body, .meta.next_cursor
//	/page/items?page=P       page P (from 1); past the end, an empty page
//	/offset/items?offset=S   rows from S; past the end, an empty page
//	/echo/...                one row: the request's escaped path and raw query
//	/oauth/token             client credentials tokens, when Options.ClientID is set
//
// Every page's body is {"data": [...rows], ...}; the styles that end by saying so end
// with null.
package httpapitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure an API.
type Options struct {
	// Rows is how many rows the dataset has; 0: 1000.
	Rows int
	// PageSize is the page size of a request without limit=; 0: 100. limit= may be
	// 1 to MaxPageSize.
	PageSize int
	// Delay is how long every page waits before it answers; 0: none.
	Delay time.Duration

	// The credentials a page request must carry; none set: no credentials. Bearer: an
	// Authorization: Bearer token; User and Password: basic authentication; HeaderName
	// and HeaderValue: a header of that name and value; ClientID and ClientSecret: a
	// bearer token that /oauth/token issued for them (client credentials grant).
	Bearer                  string
	User, Password          string
	HeaderName, HeaderValue string
	ClientID, ClientSecret  string
	TokenLifetime           time.Duration // of an issued token; 0: an hour
	RequireScope            string        // a scope the token request must ask for; "": none
	// EchoCredentials makes a 401's body repeat the credentials the request sent, as
	// some APIs do: tests check that error messages leave them out.
	EchoCredentials bool
}

// MaxPageSize is the largest limit= a request may ask for.
const MaxPageSize = 100_000

// API is the handler: the dataset, the knobs and the counts.
type API struct {
	opt  Options
	done chan struct{} // closed by Close: hanging pages return

	mu       sync.Mutex
	knobs    map[int]*knob // by page number
	requests map[int]int   // page requests answered, by page number
	log      []string      // every page request, in order: "GET /page/items?page=2&limit=10"
	tokens   int           // tokens issued
	loop     bool
	closed   bool
}

// knob is what a page does instead of answering at once.
type knob struct {
	failStatus int
	failTimes  int // answers failStatus this many more times
	retryAfter string
	slow       time.Duration
	slowTimes  int // -1: always
	hang       bool
	oversize   int // pad the body to at least this many bytes
	garble     bool
}

// New returns an API over opt's dataset.
func New(opt Options) *API {
	if opt.Rows == 0 {
		opt.Rows = 1000
	}
	if opt.PageSize == 0 {
		opt.PageSize = 100
	}
	if opt.TokenLifetime == 0 {
		opt.TokenLifetime = time.Hour
	}
	return &API{opt: opt, done: make(chan struct{}), knobs: map[int]*knob{}, requests: map[int]int{}}
}

// Server is an API served by an httptest.Server on loopback.
type Server struct {
	*API
	*httptest.Server
}

// NewServer starts an API on a loopback port. Close it when done (a test's Cleanup).
func NewServer(opt Options) *Server {
	api := New(opt)
	return &Server{API: api, Server: httptest.NewServer(api)}
}

// Close ends hanging pages, then the server, waiting for its requests.
func (s *Server) Close() {
	s.API.Close()
	s.Server.CloseClientConnections()
	s.Server.Close()
}

// Close makes hanging pages return; the API answers no page after it.
func (a *API) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.done)
	}
}

func (a *API) knob(page int) *knob {
	k := a.knobs[page]
	if k == nil {
		k = &knob{}
		a.knobs[page] = k
	}
	return k
}

// Fail makes page answer status, with a Retry-After of retryAfter when it is not
// empty, its next times requests.
func (a *API) Fail(page, status, times int, retryAfter string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.knob(page)
	k.failStatus, k.failTimes, k.retryAfter = status, times, retryAfter
}

// Slow makes page wait d before answering its next times requests; times < 0: always.
func (a *API) Slow(page int, d time.Duration, times int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.knob(page)
	k.slow, k.slowTimes = d, times
}

// Hang makes page never answer: it waits for the client to go away or the API to close.
func (a *API) Hang(page int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.knob(page).hang = true
}

// Oversize pads page's body to at least n bytes (white space inside the JSON).
func (a *API) Oversize(page, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.knob(page).oversize = n
}

// Garble makes page answer HTML instead of JSON.
func (a *API) Garble(page int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.knob(page).garble = true
}

// Loop makes every page after the first name the first page as the next one (link,
// next_url and cursor styles): an API whose pagination goes round in a circle.
func (a *API) Loop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loop = true
}

// Requests returns how many requests page has had, failed ones included.
func (a *API) Requests(page int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests[page]
}

// Total returns how many page requests the API has had.
func (a *API) Total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.log)
}

// Log returns every page request so far, in order, as "GET /page/items?page=2&limit=10".
func (a *API) Log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.log...)
}

// Tokens returns how many tokens /oauth/token has issued.
func (a *API) Tokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokens
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/oauth/token" {
		a.token(w, r)
		return
	}
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="httpapitest"`)
		detail := "unauthorized"
		if a.opt.EchoCredentials {
			detail += fmt.Sprintf(" (you sent Authorization %q", r.Header.Get("Authorization"))
			if a.opt.HeaderName != "" {
				detail += fmt.Sprintf(", %s %q", a.opt.HeaderName, r.Header.Get(a.opt.HeaderName))
			}
			detail += ")"
		}
		problem(w, http.StatusUnauthorized, detail)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		problem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	style, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if style == "echo" {
		var b []byte
		b = append(b, `{"data":[{"path":`...)
		b = appendString(b, r.URL.EscapedPath())
		b = append(b, `,"query":`...)
		b = appendString(b, r.URL.RawQuery)
		b = append(b, `,"method":`...)
		b = appendString(b, r.Method)
		b = append(b, "}]}"...)
		a.send(w, b)
		return
	}
	q := r.URL.Query()
	limit := a.opt.PageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			problem(w, http.StatusBadRequest, fmt.Sprintf("limit must be 1 to %d", MaxPageSize))
			return
		}
		limit = n
	}
	start, ok := 0, true
	switch style {
	case "link":
		start, ok = atoi(q.Get("after"), 0)
	case "next":
		start, ok = atoi(q.Get("start"), 0)
	case "cursor":
		start, ok = decodeCursor(q.Get("cursor"))
	case "page":
		var p int
		p, ok = atoi(q.Get("page"), 1)
		if ok && p < 1 {
			ok = false
		}
		start = (p - 1) * limit
	case "offset":
		start, ok = atoi(q.Get("offset"), 0)
	default:
		problem(w, http.StatusNotFound, "no such path")
		return
	}
	if !ok || start < 0 {
		problem(w, http.StatusBadRequest, "bad page parameter")
		return
	}
	page := start/limit + 1
	k, loop := a.record(r, page)
	if !a.wait(r, a.opt.Delay) || !a.wait(r, k.slow) {
		return
	}
	if k.hang {
		select {
		case <-r.Context().Done():
		case <-a.done:
		}
		return
	}
	if k.failStatus != 0 {
		if k.retryAfter != "" {
			w.Header().Set("Retry-After", k.retryAfter)
		}
		problem(w, k.failStatus, fmt.Sprintf("page %d fails on purpose", page))
		return
	}
	if k.garble {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>Service temporarily replaced by a web page</body></html>"))
		return
	}
	end := max(min(start+limit, a.opt.Rows), start)
	next, more := end, end < a.opt.Rows
	if loop && page > 1 {
		next, more = 0, true // back to the first page
	}
	b := make([]byte, 0, 64+160*max(end-start, 0))
	b = append(b, `{"data":[`...)
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		b = AppendRow(b, i)
	}
	b = append(b, ']')
	switch style {
	case "link":
		links := fmt.Sprintf(`</link/items?after=0&limit=%d>; rel="first"`, limit)
		if more {
			links += fmt.Sprintf(`, </link/items?after=%d&limit=%d>; rel="next"`, next, limit)
		}
		w.Header().Set("Link", links)
	case "next":
		b = append(b, `,"links":{"next":`...)
		if more {
			b = appendString(b, fmt.Sprintf("items?start=%d&limit=%d", next, limit))
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	case "cursor":
		b = append(b, `,"meta":{"next_cursor":`...)
		if more {
			b = appendString(b, encodeCursor(next))
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(a.opt.Rows), 10)
	if k.oversize > len(b) {
		b = append(b, bytes.Repeat([]byte(" "), k.oversize-len(b))...)
	}
	b = append(b, '}')
	a.send(w, b)
}

// record counts a page request and takes what its knob says for this one.
func (a *API) record(r *http.Request, page int) (knob, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests[page]++
	a.log = append(a.log, r.Method+" "+r.URL.RequestURI())
	k := a.knobs[page]
	if k == nil {
		return knob{}, a.loop
	}
	now := *k
	if k.failTimes > 0 {
		k.failTimes--
	} else {
		now.failStatus = 0
	}
	switch {
	case k.slowTimes > 0:
		k.slowTimes--
	case k.slowTimes == 0:
		now.slow = 0
	}
	return now, a.loop
}

// wait sleeps d, or less when the client goes away or the API closes; false: it did.
func (a *API) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-a.done:
	}
	return false
}

func (a *API) send(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (a *API) authorized(r *http.Request) bool {
	o := a.opt
	switch {
	case o.Bearer != "":
		return r.Header.Get("Authorization") == "Bearer "+o.Bearer
	case o.User != "":
		u, p, ok := r.BasicAuth()
		return ok && u == o.User && p == o.Password
	case o.HeaderName != "":
		return r.Header.Get(o.HeaderName) == o.HeaderValue
	case o.ClientID != "":
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "tok-"))
		a.mu.Lock()
		defer a.mu.Unlock()
		return ok && strings.HasPrefix(tok, "tok-") && err == nil && n >= 1 && n <= a.tokens
	}
	return true
}

// token is the client credentials grant (RFC 6749, 4.4): the client's id and secret in
// a basic Authorization header or in the form.
func (a *API) token(w http.ResponseWriter, r *http.Request) {
	if a.opt.ClientID == "" || r.Method != http.MethodPost {
		problem(w, http.StatusNotFound, "no token endpoint")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	switch {
	case r.PostForm.Get("grant_type") != "client_credentials":
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	case id != a.opt.ClientID || secret != a.opt.ClientSecret:
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	case a.opt.RequireScope != "" && !strings.Contains(" "+r.PostForm.Get("scope")+" ", " "+a.opt.RequireScope+" "):
		oauthError(w, http.StatusBadRequest, "invalid_scope")
		return
	}
	a.mu.Lock()
	a.tokens++
	n := a.tokens
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": "tok-" + strconv.Itoa(n),
		"token_type":   "Bearer",
		"expires_in":   int(a.opt.TokenLifetime.Seconds()),
	})
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"error":%q}`, code)
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	b := append([]byte(`{"status":`), strconv.Itoa(status)...)
	b = append(b, `,"detail":`...)
	b = appendString(b, detail)
	_, _ = w.Write(append(b, '}'))
}

func atoi(s string, def int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// Cursors are opaque to clients: the start row, base64'd behind a prefix.
func encodeCursor(start int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("row:" + strconv.Itoa(start)))
}

func decodeCursor(c string) (int, bool) {
	if c == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(string(b), "row:")
	if !ok {
		return 0, false
	}
	return atoi(s, 0)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
