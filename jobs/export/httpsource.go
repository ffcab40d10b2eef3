package export

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"sheetq/internal/netguard"
	"sheetq/jobs"
)

// The http driver reads a JSON API page by page (docs/reports-and-sources.md, "HTTP
// sources"). A source is one API: one client with its timeout, its credentials and its
// address guard, and one rate limiter that every export of the node shares. A report
// says what to request, where the rows are in a page and how to find the next page
// (httpsource_spec.go); pages are fetched and retried by httpsource_fetch.go, read by
// httpsource_json.go, and an export resumes from the page it stopped in
// (httpsource_place.go).

// The http driver's defaults, and the bounds of its keys.
const (
	defaultHTTPRate     = 10.0             // requests per second
	defaultHTTPTimeout  = 30 * time.Second // per response
	defaultMaxResponse  = 64 << 20         // bytes per response body
	defaultMaxPages     = 1_000_000        // per export
	maxHTTPTimeout      = time.Hour
	maxMaxResponse      = 1 << 30
	minMaxResponse      = 1 << 10
	httpDialTimeout     = 10 * time.Second
	httpRetries         = 8 // retries of one page after its first try
	httpBackoff         = 500 * time.Millisecond
	httpMaxBackoff      = 30 * time.Second
	httpMaxRetryAfter   = 5 * time.Minute
	httpMaxRedirects    = 10
	httpUserAgent       = "sheetq"
	httpExcerptBytes    = 4 << 10 // read of a refused answer's body, for its excerpt
	httpExcerptRunes    = 200
	httpRowsBetweenPoll = 4096 // rows sent between looks at ctx
)

// httpSource is a source of driver http.
type httpSource struct {
	name        string
	base        *url.URL // ends in /
	origin      string   // base's scheme://host: the only place credentials go
	client      *http.Client
	limiter     *rate.Limiter
	maxResponse int64
	maxPages    int64
	timeout     time.Duration   // per response
	secrets     func() []string // the credentials, cut out of any excerpt or message
	log         *slog.Logger

	// The retry policy; tests shorten the waits.
	retries       int
	backoff       time.Duration // the first; it doubles up to maxBackoff
	maxBackoff    time.Duration
	maxRetryAfter time.Duration
}

var (
	_ Source  = (*httpSource)(nil)
	_ Resumer = (*httpSource)(nil)
	_ Logged  = (*httpSource)(nil)
)

// openHTTP validates an http source's keys and builds its client. Nothing is requested
// yet, not even an OAuth2 token.
func openHTTP(name string, sc SourceConfig, baseDir string) (*httpSource, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("source %q: "+format, append([]any{name}, args...)...)
	}
	switch {
	case sc.Path != "" || sc.DSN != "":
		return nil, bad("driver http takes base_url, not path or dsn")
	case sc.BaseURL == "":
		return nil, bad("driver http needs base_url, the API's URL, such as https://api.example.com/v1/")
	}
	base, err := parseBaseURL(sc.BaseURL)
	if err != nil {
		return nil, bad("base_url: %v", err)
	}
	s := &httpSource{
		name: name, base: base, origin: originOf(base),
		maxResponse: defaultMaxResponse, maxPages: defaultMaxPages,
		retries: httpRetries, backoff: httpBackoff, maxBackoff: httpMaxBackoff, maxRetryAfter: httpMaxRetryAfter,
		log: slog.Default(),
	}
	r := sc.Rate
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0) || r < 0:
		return nil, bad("rate must be a number of requests per second above 0, not %v", r)
	case r == 0:
		r = defaultHTTPRate
	}
	// A burst of one keeps the spacing even: an API's limit is usually per second, and
	// a burst would spend it at once.
	s.limiter = rate.NewLimiter(rate.Limit(r), 1)
	timeout := defaultHTTPTimeout
	if sc.Timeout != "" {
		if timeout, err = time.ParseDuration(sc.Timeout); err != nil || timeout <= 0 || timeout > maxHTTPTimeout {
			return nil, bad("timeout %q: want a duration above 0 and at most %s, such as \"30s\"", sc.Timeout, maxHTTPTimeout)
		}
	}
	if sc.MaxResponse != "" {
		if s.maxResponse, err = parseByteSize(sc.MaxResponse); err != nil || s.maxResponse < minMaxResponse || s.maxResponse > maxMaxResponse {
			return nil, bad("max_response %q: want a size from 1KiB to 1GiB, such as \"32MiB\"", sc.MaxResponse)
		}
	}
	switch {
	case sc.MaxPages < 0:
		return nil, bad("max_pages must be 1 or more, not %d", sc.MaxPages)
	case sc.MaxPages > 0:
		s.maxPages = sc.MaxPages
	}

	dialer := &net.Dialer{Timeout: httpDialTimeout, KeepAlive: 30 * time.Second}
	if !sc.AllowPrivate {
		// At dial time, after DNS, for every address tried: a name that resolves to
		// 127.0.0.1, and a redirect to one, are refused too.
		dialer.Control = netguard.DialControl
	}
	transport := &http.Transport{
		// No proxy from the environment: the address check must see the API's address,
		// not a proxy's that would then connect anywhere.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	auth, secrets, err := newHTTPAuth(sc.Auth, baseDir, &http.Client{Transport: transport, Timeout: timeout})
	if err != nil {
		return nil, bad("auth: %v", err)
	}
	s.secrets, s.timeout = secrets, timeout
	s.client = &http.Client{
		Transport: &authTransport{next: transport, origin: s.origin, auth: auth},
		// The whole response, body included: a page that trickles in is as stuck as one
		// that never starts.
		Timeout: timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= httpMaxRedirects {
				return fmt.Errorf("stopped after %d redirects", httpMaxRedirects)
			}
			return nil
		},
	}
	return s, nil
}

// parseBaseURL checks a base_url: an absolute http or https URL, with no credentials, no
// query and no fragment. Its path is taken as a folder: a / is added at its end, so
// that "orders" is relative to all of it.
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %v", raw, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: want an absolute http:// or https:// URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		// Printing raw would print the password.
		return nil, errors.New("must not hold a user or password: put them in auth")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("%q: a base_url has no query; put parameters in the report's request line", raw)
	case u.Fragment != "":
		return nil, fmt.Errorf("%q: a base_url has no #fragment", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", raw, p)
		}
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

// originOf is u's scheme and host (with its port, when it has one), lowercased.
func originOf(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// parseByteSize reads a size: a whole number of bytes, or of KiB, MiB or GiB with that
// suffix ("32MiB", "512 KiB").
func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, errors.New("not a size")
	}
	return n * mult, nil
}

// SetLogger implements Logged: retried pages are logged there.
func (s *httpSource) SetLogger(l *slog.Logger) {
	if l != nil {
		s.log = l
	}
}

// Close lets the source's idle connections go.
func (s *httpSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// Resumable implements Resumer: an HTTP report resumes from the page it stopped in.
func (s *httpSource) Resumable(r Report) (bool, string) {
	if r.Request == "" {
		return false, "the report has no request line, which an http source needs"
	}
	return true, ""
}

// Stream implements Source: it requests the report's pages one after another, each
// after the one before it has been sent, and sends their rows in order.
func (s *httpSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	spec, err := httpSpecOf(q.Report)
	if err != nil {
		return jobs.Permanent("bad_report", fmt.Errorf("source %s: %w", s.name, err))
	}
	st := &httpStream{src: s, spec: spec, q: q, w: w, seed: maphash.MakeSeed()}
	return st.run(ctx)
}

// httpStream is one run of a report on an http source.
type httpStream struct {
	src  *httpSource
	spec httpSpec
	q    Query
	w    RowWriter

	log     *pageLog // the pages sent, for the Placer; nil without Query.Place
	cols    []Column // the file's columns; nil until a page has rows
	began   bool
	seed    maphash.Seed
	seen    map[uint64]int64 // the URLs requested (by hash), with their page: the loop guard
	vals    []any
	dropped droppedKeys
}

// pageRef is where a page is and where its rows go.
type pageRef struct {
	url   *url.URL
	page  int64 // its number in the export, from 1
	first int64 // how many rows of the export come before it
	skip  int64 // its rows already written (a resumed export's first page)
}

func (st *httpStream) run(ctx context.Context) error {
	s := st.src
	ref, err := st.start()
	if err != nil {
		return err
	}
	if st.q.Place != nil {
		st.log = &pageLog{}
		st.log.setColumns(st.cols)
	}
	guard := st.spec.page.style == pageLink || st.spec.page.style == pageNextURL || st.spec.page.style == pageCursor
	if guard {
		st.seen = map[uint64]int64{}
		st.seen[maphash.String(st.seed, ref.url.String())] = ref.page
	}
	for {
		if ref.page > s.maxPages {
			return jobs.Permanent("bad_response", fmt.Errorf("source %s: the export reached page %d, past max_pages (%d): the API's pagination does not end",
				s.name, ref.page, s.maxPages))
		}
		body, header, err := s.fetch(ctx, st.spec.method, ref.url, ref.page)
		if err != nil {
			return err
		}
		doc, order, err := decodePage(body, st.cols == nil)
		if err != nil {
			return jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d (%s %s) is not JSON%s: %v",
				s.name, ref.page, st.spec.method, ref.url.Path, contentTypeNote(header), err))
		}
		rows, err := st.pageRows(ctx, doc, ref.page)
		if err != nil {
			return err
		}
		next, err := st.nextPage(ctx, ref, doc, header, int64(len(rows)))
		if err != nil {
			return err
		}
		if int64(len(rows)) < ref.skip {
			return jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d now has %d rows, but %d of it were written before the export stopped: the API's data changed; export again",
				s.name, ref.page, len(rows), ref.skip))
		}
		if st.cols == nil && len(rows) > 0 {
			st.cols = inferColumns(rows, order)
			if st.log != nil {
				st.log.setColumns(st.cols)
			}
		}
		if st.log != nil {
			st.log.add(pageEntry{url: ref.url.String(), page: ref.page, first: ref.first, rows: int64(len(rows))})
		}
		if !st.began && st.cols != nil {
			if err := st.begin(-1); err != nil {
				return err
			}
		}
		if err := st.send(ctx, rows[ref.skip:], ref.page); err != nil {
			return err
		}
		if next == nil {
			break
		}
		if guard {
			h := maphash.String(st.seed, next.String())
			if p, ok := st.seen[h]; ok {
				return jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d names page %d again as the next one: the API's pagination goes round in a circle",
					s.name, ref.page, p))
			}
			st.seen[h] = ref.page + 1
		}
		ref = pageRef{url: next, page: ref.page + 1, first: ref.first + int64(len(rows))}
	}
	if !st.began {
		// No page had a row: the report's column lines, if any, make the header.
		st.cols = make([]Column, len(st.q.Report.Columns))
		for i, c := range st.q.Report.Columns {
			st.cols[i] = Column{Name: c.Name, Type: TypeText}
		}
		if err := st.begin(0); err != nil {
			return err
		}
	}
	if msg := st.dropped.warning(); msg != "" && st.q.Warn != nil {
		st.q.Warn(msg)
	}
	return nil
}

// start is the first page to request: the request line's, or for a resumed export the
// page its token names.
func (st *httpStream) start() (pageRef, error) {
	s := st.src
	if st.q.From == nil {
		target, err := fillTarget(st.spec.target, st.q.Params)
		if err != nil {
			var pe *ParamError
			if errors.As(err, &pe) {
				return pageRef{}, jobs.Permanent("bad_params", err)
			}
			return pageRef{}, jobs.Permanent("bad_report", fmt.Errorf("source %s: request: %w", s.name, err))
		}
		rel, err := url.Parse(target)
		if err != nil {
			return pageRef{}, jobs.Permanent("bad_params", fmt.Errorf("source %s: the request %q is not a URL: %v", s.name, target, errors.Unwrap(err)))
		}
		u := s.base.ResolveReference(rel)
		if !strings.HasPrefix(u.Path, s.base.Path) || originOf(u) != s.origin {
			return pageRef{}, jobs.Permanent("bad_params", fmt.Errorf("source %s: the request %q leaves base_url", s.name, target))
		}
		return pageRef{url: u, page: 1}, nil
	}
	tok, err := parseHTTPToken(st.q.From.Token)
	if err != nil {
		return pageRef{}, jobs.Permanent("bad_checkpoint", fmt.Errorf("source %s: cannot resume: %w", s.name, err))
	}
	u, err := url.Parse(tok.URL)
	switch {
	case err != nil:
		return pageRef{}, jobs.Permanent("bad_checkpoint", fmt.Errorf("source %s: cannot resume: the checkpoint's page is not a URL", s.name))
	case originOf(u) != s.origin:
		return pageRef{}, jobs.Permanent("bad_checkpoint", fmt.Errorf("source %s: cannot resume: the checkpoint's page is on %s, not on base_url (did base_url change?)", s.name, originOf(u)))
	case tok.Skip < 0 || tok.Skip > st.q.From.Rows || tok.Page < 1:
		return pageRef{}, jobs.Permanent("bad_checkpoint", fmt.Errorf("source %s: cannot resume: the checkpoint's place (page %d, row %d of it, %d rows written) does not add up",
			s.name, tok.Page, tok.Skip, st.q.From.Rows))
	}
	if tok.Columns != nil {
		st.cols = make([]Column, len(tok.Columns))
		for i, c := range tok.Columns {
			st.cols[i] = Column{Name: c.Name, Type: c.Type}
		}
	}
	return pageRef{url: u, page: tok.Page, first: st.q.From.Rows - tok.Skip, skip: tok.Skip}, nil
}

// begin hands the writer the Placer, then the columns.
func (st *httpStream) begin(total int64) error {
	st.began = true
	if st.q.Place != nil {
		st.q.Place(st.log.token)
	}
	st.vals = make([]any, len(st.cols))
	return st.w.Begin(st.cols, total)
}

// send writes a page's rows, each as the columns' values: a key the columns lack is
// left out (and counted for the warning), a column the row lacks is empty.
func (st *httpStream) send(ctx context.Context, rows []map[string]any, page int64) error {
	var enc jsonText
	for i, m := range rows {
		if i%httpRowsBetweenPoll == httpRowsBetweenPoll-1 && ctx.Err() != nil {
			return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", st.src.name, ctx.Err()))
		}
		found := 0
		for j, c := range st.cols {
			v, ok := m[c.Name]
			if ok {
				found++
			}
			st.vals[j] = jsonCell(v, &enc)
		}
		if found < len(m) {
			st.dropped.note(m, st.cols, page)
		}
		if err := st.w.Row(st.vals); err != nil {
			return err
		}
	}
	return nil
}

// contentTypeNote is ", Content-Type X" for a message about a body that is not JSON.
func contentTypeNote(h http.Header) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return " (Content-Type " + shorten(ct, 60) + ")"
	}
	return ""
}
