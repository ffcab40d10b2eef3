package middleware

import (
	"net/netip"
	"testing"
	"time"
)

// The limit's arithmetic on a fake clock: a window, the lockout and its end, the /64 an
// IPv6 client is counted by, and the bounded table.
func TestAttemptLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newAttemptLimiter(func() time.Time { return now })
	fail := func(ip string, n int) (lockouts int) {
		for range n {
			if l.failed(ip) {
				lockouts++
			}
		}
		return lockouts
	}

	// Failures spread wider than the window never lock.
	for range 3 {
		if fail("192.0.2.1", SignInFailures-1) != 0 {
			t.Fatal("locked out below the limit")
		}
		now = now.Add(SignInWindow)
	}
	if _, locked := l.locked("192.0.2.1"); locked {
		t.Fatal("locked out by failures in separate windows")
	}

	// The limit within one window locks out, once, until the lockout ends.
	if n := fail("192.0.2.1", SignInFailures); n != 1 {
		t.Fatalf("%d lockouts began, want 1", n)
	}
	if wait, locked := l.locked("192.0.2.1"); !locked || wait != SignInLockout {
		t.Fatalf("locked %v for %s, want %s", locked, wait, SignInLockout)
	}
	if _, locked := l.locked("192.0.2.2"); locked {
		t.Fatal("another address is locked out")
	}
	now = now.Add(SignInLockout - time.Second)
	if wait, locked := l.locked("192.0.2.1"); !locked || wait != time.Second {
		t.Fatalf("a second before the end: locked %v, %s left", locked, wait)
	}
	now = now.Add(time.Second)
	if _, locked := l.locked("192.0.2.1"); locked {
		t.Fatal("still locked out after the lockout")
	}
	if fail("192.0.2.1", 1) != 0 {
		t.Fatal("a failure after the lockout locked out again: the count did not start over")
	}

	// An IPv6 client is counted by its /64; an IPv4 address is the same written as IPv6.
	fail("2001:db8:1:2::1", SignInFailures/2)
	fail("2001:db8:1:2:ffff::9", SignInFailures-SignInFailures/2)
	if _, locked := l.locked("2001:db8:1:2::77"); !locked {
		t.Error("addresses of one /64 are counted apart")
	}
	if _, locked := l.locked("2001:db8:1:3::1"); locked {
		t.Error("the next /64 is locked out too")
	}
	fail("::ffff:192.0.2.50", SignInFailures)
	if _, locked := l.locked("192.0.2.50"); !locked {
		t.Error("an IPv4-mapped address is counted apart from its IPv4 form")
	}

	// The table stays bounded, with every entry live and locked out.
	for i := range signInTracked + 100 {
		fail(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), SignInFailures)
	}
	if n := len(l.clients); n > signInTracked {
		t.Fatalf("%d addresses tracked, bound %d", n, signInTracked)
	}
}
