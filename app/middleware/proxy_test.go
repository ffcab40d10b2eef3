package middleware

import (
	"net/netip"
	"testing"
)

func TestForwardedFor(t *testing.T) {
	s := &Stack{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}
	peer := netip.MustParseAddr("10.0.0.2")
	for _, tt := range []struct {
		values []string
		want   string
	}{
		{nil, "10.0.0.2"},
		{[]string{"203.0.113.9"}, "203.0.113.9"},
		{[]string{"1.1.1.1, 203.0.113.9, 10.1.2.3"}, "203.0.113.9"}, // client-written 1.1.1.1 ignored
		{[]string{"1.1.1.1", "203.0.113.9"}, "203.0.113.9"},         // two header lines
		{[]string{"10.0.0.5, 10.0.0.9"}, "10.0.0.5"},                // all trusted: the farthest
		{[]string{"203.0.113.9, garbage"}, "10.0.0.2"},              // malformed nearest hop
		{[]string{"::ffff:203.0.113.9"}, "203.0.113.9"},
	} {
		if got := s.forwardedFor(tt.values, peer); got != tt.want {
			t.Errorf("forwardedFor(%q) = %s, want %s", tt.values, got, tt.want)
		}
	}
}
