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

	"sheetq/internal/netguard"
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

// Blocked reports whether webhooks may not reach ip when private addresses are not
// allowed: loopback, private, link-local, unspecified, multicast, other non-public
// ranges, and IPv6 addresses that embed a blocked IPv4 address (docs/api.md,
// "Webhooks", lists the forms). The rule is internal/netguard's, which HTTP sources
// share.
func Blocked(ip netip.Addr) bool { return netguard.Blocked(ip) }

// dialControl refuses to connect to a blocked address. It runs for every address the
// dialer tries, after DNS resolution, so a host that resolved to a public address at
// acceptance and to 127.0.0.1 now (DNS rebinding) is still refused.
func dialControl(network, address string, c syscall.RawConn) error {
	if err := netguard.DialControl(network, address, c); err != nil {
		return fmt.Errorf("%w: %v", ErrNotAllowed, err)
	}
	return nil
}
