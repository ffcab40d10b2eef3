package netguard_test

import (
	"errors"
	"net/netip"
	"testing"

	"sheetq/internal/netguard"
)

// The webhook package's tests (jobs/webhook, ssrf_test.go) go through every embedding
// of IPv4 in IPv6; these check the guard's own surface.
func TestBlockedAndDialControl(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:443", true},
		{"10.0.0.7:80", true},
		{"192.168.1.1:80", true},
		{"169.254.169.254:80", true},
		{"0.0.0.0:80", true},
		{"224.0.0.1:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"[64:ff9b::7f00:1]:80", true},
		{"[fe80::1%eth0]:80", true},
		{"8.8.8.8:443", false},
		{"[2606:4700::1111]:443", false},
	} {
		ap := netip.MustParseAddrPort(tc.addr)
		if got := netguard.Blocked(ap.Addr()); got != tc.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", ap.Addr(), got, tc.blocked)
		}
		err := netguard.DialControl("tcp", tc.addr, nil)
		var re *netguard.RefusedError
		if tc.blocked != errors.As(err, &re) {
			t.Errorf("DialControl(%s) = %v, want refused %v", tc.addr, err, tc.blocked)
		}
	}
	if err := netguard.DialControl("tcp", "not an address", nil); err == nil {
		t.Error("an address that does not parse must be refused")
	}
	err := netguard.DialControl("tcp", "[::ffff:10.0.0.1]:80", nil)
	if err == nil || err.Error() != "10.0.0.1 is not a public address" {
		t.Errorf("message %v, want the unmapped address", err)
	}
}
