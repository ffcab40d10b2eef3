// Package netguard decides which network addresses sheetq may connect to on a user's
// behalf (webhooks, HTTP sources) when private addresses are not allowed: loopback,
// private, link-local, unspecified, multicast and other non-public ranges are refused,
// also when an IPv6 address carries one of them. It checks addresses, never names: the
// check belongs at dial time, after DNS, so that a name that resolves to 127.0.0.1 is
// refused too. It imports nothing of ours.
package netguard

import (
	"fmt"
	"net/netip"
	"syscall"
)

// RefusedError is a connection refused because its address is not public.
type RefusedError struct {
	Addr netip.Addr // unmapped, without zone; invalid when the address did not parse
	Raw  string     // the address as the dialer gave it
}

func (e *RefusedError) Error() string {
	if !e.Addr.IsValid() {
		return fmt.Sprintf("cannot check address %q", e.Raw)
	}
	return fmt.Sprintf("%s is not a public address", e.Addr)
}

// DialControl is a net.Dialer's Control hook that refuses to connect to an address
// Blocked refuses. It runs for every address the dialer tries, after name resolution,
// so a host that resolved to a public address when a URL was checked and to 127.0.0.1
// now (DNS rebinding) is still refused. Its errors are *RefusedError.
func DialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Raw: address}
	}
	if Blocked(ap.Addr()) {
		return &RefusedError{Addr: ap.Addr().WithZone("").Unmap(), Raw: address}
	}
	return nil
}

// blockedPrefixes are non-public ranges that netip's predicates do not cover.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT, often internal (e.g. Tailscale)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("::/96"),          // IPv4-compatible IPv6 (deprecated), with :: and ::1
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215): a site's own translator
}

// IPv6 forms that carry an IPv4 address a packet to them reaches (or comes from):
// IPv4-mapped ::ffff:0:0/96 is unmapped first; the rest are below.
var (
	translated = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765, SIIT): last 32 bits
	nat64      = netip.MustParsePrefix("64:ff9b::/96")    // well-known NAT64 (RFC 6052): last 32 bits
	sixToFour  = netip.MustParsePrefix("2002::/16")       // 6to4 (RFC 3056): bits 16-48
	teredo     = netip.MustParsePrefix("2001::/32")       // Teredo (RFC 4380): server bits 32-64, client NOT bits 96-128
)

// embeddedIPv4 returns the IPv4 addresses that ip, an IPv6 address without zone, carries
// in one of the standard embeddings: a connection to it would reach them.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	b := ip.As16()
	v4 := func(p []byte) netip.Addr { return netip.AddrFrom4([4]byte(p)) }
	var out []netip.Addr
	switch {
	case translated.Contains(ip), nat64.Contains(ip):
		out = append(out, v4(b[12:16]))
	case sixToFour.Contains(ip):
		out = append(out, v4(b[2:6]))
	case teredo.Contains(ip):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]} // stored inverted
		out = append(out, v4(b[4:8]), netip.AddrFrom4(client))
	}
	// ISATAP (RFC 5214) under any prefix: an interface id of 0000:5efe or 0200:5efe
	// (the u bit set for a global IPv4 address; the g bit is ignored too) and the IPv4
	// address.
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, v4(b[12:16]))
	}
	return out
}

// Blocked reports whether ip may not be reached when private addresses are not allowed:
// loopback, private, link-local, unspecified, multicast, the ranges above, and IPv6
// addresses that embed a blocked IPv4 address (docs/api.md, "Webhooks", lists the forms).
func Blocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	// A zone is no part of the address; prefixes never contain a zoned one, so keeping it
	// would let fe80::1%eth0's cousins such as 64:ff9b::7f00:1%eth0 through.
	ip = ip.WithZone("").Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if ip.Is6() {
		for _, v4 := range embeddedIPv4(ip) {
			if Blocked(v4) {
				return true
			}
		}
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
