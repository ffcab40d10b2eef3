package app

import (
	"net"
	"net/netip"
	"os"
	"strconv"
)

// localURL is the URL at which this machine reaches a listener on addr. An unspecified
// address (0.0.0.0, ::, which Go reports as [::] for both) is not one a browser can
// open: loopback stands in for it, in the family the listener's host was given in.
func localURL(configuredHost string, addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if !ap.Addr().IsUnspecified() {
		return "http://" + ap.String()
	}
	loop := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if h, err := netip.ParseAddr(configuredHost); err == nil && h.Is6() && !h.Is4In6() {
		loop = netip.IPv6Loopback()
	}
	return "http://" + netip.AddrPortFrom(loop, ap.Port()).String()
}

// networkURL is the URL other machines may use for a listener on every address: this
// machine's host name; "" when the listener is on one address only, or the name is
// unknown.
func networkURL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		return ""
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(name, strconv.Itoa(int(ap.Port())))
}
