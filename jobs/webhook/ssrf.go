package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// MaxURLLength bounds a webhook URL.
const MaxURLLength = 2048

// ErrInvalidURL is returned for a URL that is not an absolute http or https URL of at
// most MaxURLLength characters, or whose host does not resolve.
var ErrInvalidURL = errors.New("invalid webhook URL")

// ErrNotAllowed is returned for a URL whose host is, or resolves to, an address webhooks
// may not reach: loopback, private, link-local, unspecified, multicast and other
// non-public ranges (unless private addresses are allowed).
var ErrNotAllowed = errors.New("webhook address not allowed")

// ValidateURL checks the form of a webhook URL, without resolving its host.
func ValidateURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w: longer than %d characters", ErrInvalidURL, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: want an absolute http:// or https:// URL", ErrInvalidURL)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: bad port %q", ErrInvalidURL, p)
		}
	}
	return u, nil
}

// CheckURL is the check at acceptance: the URL's form, and unless allowPrivate, that
// every address its host resolves to is public. Delivery checks again on the address
// actually dialled, since DNS may answer differently later.
func CheckURL(ctx context.Context, raw string, allowPrivate bool, r *net.Resolver) error {
	u, err := ValidateURL(raw)
	if err != nil || allowPrivate {
		return err
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if Blocked(ip) {
			return fmt.Errorf("%w: %s is not a public address", ErrNotAllowed, ip)
		}
		return nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: host %s does not resolve", ErrInvalidURL, host)
	}
	for _, ip := range addrs {
		if Blocked(ip) {
			return fmt.Errorf("%w: %s resolves to %s, which is not a public address", ErrNotAllowed, host, ip.Unmap())
		}
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
// in one of the standard embeddings: a webhook to it would reach them.
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

// Blocked reports whether webhooks may not reach ip when private addresses are not
// allowed: loopback, private, link-local, unspecified, multicast, the ranges above, and
// IPv6 addresses that embed a blocked IPv4 address (docs/api.md, "Webhooks", lists the forms).
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

// dialControl refuses to connect to a blocked address. It runs for every address the
// dialer tries, after DNS resolution, so a host that resolved to a public address at
// acceptance and to 127.0.0.1 now (DNS rebinding) is still refused.
func dialControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrNotAllowed, address)
	}
	if Blocked(ap.Addr()) {
		return fmt.Errorf("%w: %s is not a public address", ErrNotAllowed, ap.Addr().Unmap())
	}
	return nil
}
