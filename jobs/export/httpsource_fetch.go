package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"sheetq/internal/netguard"
	"sheetq/jobs"
)

// fetch requests one page and returns its body, retrying the page, not the export: a
// 429 or 503 waits for its Retry-After (at most maxRetryAfter; none given, the backoff),
// and a connection error, a timeout, a 408 or another 5xx waits for the backoff, up to
// s.retries times. Every try waits for the source's rate limiter first. A 4xx is
// permanent, and so is a body over max_response.
func (s *httpSource) fetch(ctx context.Context, method string, u *url.URL, page int64) ([]byte, http.Header, error) {
	for try := 0; ; try++ {
		if err := s.limiter.Wait(ctx); err != nil {
			return nil, nil, s.canceled(ctx, err)
		}
		res := s.try(ctx, method, u, page)
		switch {
		case res.err == nil:
			return res.body, res.header, nil
		case ctx.Err() != nil:
			return nil, nil, s.canceled(ctx, ctx.Err())
		case !res.retry:
			return nil, nil, res.err
		case try >= s.retries:
			return nil, nil, jobs.RetryableAfter("upstream", fmt.Errorf("%w (%d tries)", res.err, try+1), res.after)
		}
		wait := res.after
		if !res.hasAfter {
			wait = s.backoffFor(try)
		}
		s.log.WarnContext(ctx, "http source: page failed, asking again", "source", s.name, "page", page,
			"try", try+1, "wait", wait.Round(time.Millisecond).String(), "err", res.err.Error())
		if err := sleep(ctx, wait); err != nil {
			return nil, nil, s.canceled(ctx, err)
		}
	}
}

// tryResult is one try of a page.
type tryResult struct {
	body     []byte
	header   http.Header
	err      error         // nil: body is the page
	retry    bool          // the page is worth another try
	after    time.Duration // the wait the API asked for
	hasAfter bool          // whether it asked
}

func (s *httpSource) try(ctx context.Context, method string, u *url.URL, page int64) tryResult {
	where := fmt.Sprintf("source %s: page %d (%s %s)", s.name, page, method, u.Path)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return tryResult{err: jobs.Permanent("bad_report", fmt.Errorf("%s: %v", where, err))}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", httpUserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		var refused *netguard.RefusedError
		var authErr *httpAuthError
		switch {
		case ctx.Err() != nil:
			return tryResult{err: s.canceled(ctx, ctx.Err())}
		case errors.As(err, &refused):
			what := ""
			if errors.As(err, &authErr) {
				what = "the oauth2 token endpoint's address "
			}
			return tryResult{err: jobs.Permanent("not_allowed", fmt.Errorf("%s: %s%v; set allow_private = true in [sources.%s] to reach private addresses",
				where, what, refused, s.name))}
		case errors.As(err, &authErr) && authErr.permanent:
			return tryResult{err: jobs.Permanent("upstream_rejected", fmt.Errorf("%s: %v", where, authErr))}
		}
		return tryResult{err: jobs.Retryable("upstream", fmt.Errorf("%s: %v", where, s.redact(s.transportMessage(err)))), retry: true}
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	switch {
	case status >= 200 && status <= 299:
		body, err := io.ReadAll(io.LimitReader(resp.Body, s.maxResponse+1))
		switch {
		case err != nil && ctx.Err() != nil:
			return tryResult{err: s.canceled(ctx, ctx.Err())}
		case err != nil:
			return tryResult{err: jobs.Retryable("upstream", fmt.Errorf("%s: reading the answer: %v", where, s.transportMessage(err))), retry: true}
		case int64(len(body)) > s.maxResponse:
			return tryResult{err: jobs.Permanent("bad_response", fmt.Errorf("%s: the answer is larger than max_response (%s); ask for smaller pages, or raise max_response in [sources.%s]",
				where, byteSize(s.maxResponse), s.name))}
		}
		return tryResult{body: body, header: resp.Header}
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		after, has := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		after = min(after, s.maxRetryAfter)
		drain(resp.Body)
		return tryResult{err: jobs.Retryable("upstream", fmt.Errorf("%s: the API answered %s", where, resp.Status)), retry: true, after: after, hasAfter: has}
	case status == http.StatusRequestTimeout || status >= 500:
		text := s.excerpt(resp.Body)
		return tryResult{err: jobs.Retryable("upstream", fmt.Errorf("%s: the API answered %s%s", where, resp.Status, text)), retry: true}
	case status >= 400:
		text := s.excerpt(resp.Body)
		return tryResult{err: jobs.Permanent("upstream_rejected", fmt.Errorf("%s: the API answered %s%s", where, resp.Status, text))}
	}
	drain(resp.Body)
	return tryResult{err: jobs.Permanent("bad_response", fmt.Errorf("%s: the API answered %s, not a page", where, resp.Status))}
}

// canceled is the error of a page given up because the export's context ended.
func (s *httpSource) canceled(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", s.name, err))
}

// backoffFor is the wait before retry number try+1: the backoff doubled try times, at
// most maxBackoff, less up to a fifth at random so that exports retrying together
// spread out.
func (s *httpSource) backoffFor(try int) time.Duration {
	d := s.backoff
	for range try {
		if d >= s.maxBackoff/2 {
			d = s.maxBackoff
			break
		}
		d *= 2
	}
	d = min(d, s.maxBackoff)
	if d > 0 {
		d -= time.Duration(rand.Int64N(int64(d)/5 + 1))
	}
	return d
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date. has is false when
// there is none, or it does not parse.
func retryAfter(v string, now time.Time) (d time.Duration, has bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// drain reads a little of a body that is not used, so that the connection can serve the
// next page.
func drain(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
}

// excerpt is ": " and the start of a refused answer's body, as one line of printable
// text without the source's credentials, or "" for an empty body: enough to see what
// the API said, too little to fill a page.
func (s *httpSource) excerpt(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, httpExcerptBytes))
	drain(body)
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return ' '
		}
		return r
	}, text)
	text = strings.Join(strings.Fields(s.redact(text)), " ")
	if text == "" {
		return ""
	}
	if utf8.RuneCountInString(text) > httpExcerptRunes {
		text = string([]rune(text)[:httpExcerptRunes]) + "…"
	}
	return ": " + text
}

// redact cuts the source's credentials out of text.
func (s *httpSource) redact(text string) string {
	if s.secrets == nil {
		return text
	}
	for _, secret := range s.secrets() {
		if secret != "" {
			text = strings.ReplaceAll(text, secret, "[redacted]")
		}
	}
	return text
}

// transportMessage is a client error without the "Get "URL": " that net/http puts in
// front of it (the message names the page already), and a timeout in words.
func (s *httpSource) transportMessage(err error) string {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return fmt.Sprintf("no answer within %s (the source's timeout)", s.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// byteSize writes n bytes as KiB, MiB or GiB when it is a whole number of them.
func byteSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
