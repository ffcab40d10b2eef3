package middleware

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"sheetq/app/problem"
)

// Failed sign-ins are limited per client address, for bearer tokens and the sign-in form
// together: after SignInFailures wrong tokens within SignInWindow, every attempt from that
// address that presents a token is answered 429 for SignInLockout, whether the token is
// right or not, so that guesses cannot be slipped in between. A valid session cookie
// still works: it is no guess, and only a right token gets one.
const (
	SignInFailures = 10
	SignInWindow   = time.Minute
	SignInLockout  = 5 * time.Minute
	// signInTracked bounds the table: at most this many addresses (about 100 bytes
	// each) are remembered at once.
	signInTracked = 10_000
)

// attemptLimiter counts failed sign-ins per client address.
type attemptLimiter struct {
	now func() time.Time

	mu      sync.Mutex
	clients map[string]*attempts
}

// attempts is one address's record.
type attempts struct {
	failures int
	since    time.Time // first failure of the current window
	until    time.Time // end of the lockout; zero: none
}

// expired reports whether a record no longer limits anything at now.
func (a *attempts) expired(now time.Time) bool {
	if !a.until.IsZero() {
		return !now.Before(a.until)
	}
	return now.Sub(a.since) >= SignInWindow
}

func newAttemptLimiter(now func() time.Time) *attemptLimiter {
	return &attemptLimiter{now: now, clients: map[string]*attempts{}}
}

// limitKey is the address the limit counts by: an IPv4 address, or the /64 an IPv6
// address is in, since one IPv6 host commonly holds a whole /64.
func limitKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// locked reports whether ip is locked out, and for how much longer.
func (l *attemptLimiter) locked(ip string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	key := limitKey(ip)
	a := l.clients[key]
	if a == nil {
		return 0, false
	}
	if a.expired(now) {
		delete(l.clients, key)
		return 0, false
	}
	if a.until.IsZero() {
		return 0, false
	}
	return a.until.Sub(now), true
}

// failed records a wrong token from ip. It reports whether this failure began a lockout,
// so that the caller logs each lockout once.
func (l *attemptLimiter) failed(ip string) (lockedOut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	key := limitKey(ip)
	a := l.clients[key]
	if a != nil && a.expired(now) {
		delete(l.clients, key)
		a = nil
	}
	if a == nil {
		l.makeRoom(now)
		a = &attempts{since: now}
		l.clients[key] = a
	}
	if !a.until.IsZero() {
		return false // already locked out; callers do not get this far
	}
	a.failures++
	if a.failures < SignInFailures {
		return false
	}
	a.until = now.Add(SignInLockout)
	return true
}

// makeRoom keeps the table under signInTracked: it drops the records that have run out,
// and if none have, the one that limits least (a count below the limit before any
// lockout, else the lockout that ends first). Memory stays bounded; a client with more
// addresses than the table holds can shorten its own lockouts, not anyone else's.
func (l *attemptLimiter) makeRoom(now time.Time) {
	if len(l.clients) < signInTracked {
		return
	}
	for k, a := range l.clients {
		if a.expired(now) {
			delete(l.clients, k)
		}
	}
	if len(l.clients) < signInTracked {
		return
	}
	var victim string
	var least *attempts
	for k, a := range l.clients {
		if least == nil || lessLimiting(a, least) {
			victim, least = k, a
		}
	}
	delete(l.clients, victim)
}

// lessLimiting orders records by how much they still hold back their client.
func lessLimiting(a, b *attempts) bool {
	switch {
	case a.until.IsZero() != b.until.IsZero():
		return a.until.IsZero()
	case a.until.IsZero():
		return a.failures < b.failures
	}
	return a.until.Before(b.until)
}

// RetryAfterSeconds is a wait as the whole seconds of a Retry-After header, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// SignInFailed records a wrong token from the request's client and logs, once per
// lockout, that the address is now locked out.
func (s *Stack) SignInFailed(r *http.Request) {
	ip := Client(r.Context()).IP
	if s.auth.limits.failed(ip) {
		s.cfg.Log.WarnContext(r.Context(), "sign-in attempts limited: too many wrong tokens from one address",
			"client_ip", ip, "failures", SignInFailures, "window", SignInWindow, "lockout", SignInLockout)
	}
}

// tooManyAttempts answers an API request from a locked-out address.
func tooManyAttempts(w http.ResponseWriter, wait time.Duration) {
	secs := RetryAfterSeconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	problem.Write(w, http.StatusTooManyRequests, "too_many_attempts",
		"too many wrong tokens from this address; try again in "+strconv.Itoa(secs)+" s")
}
