package app

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// clientInfo is the client of a request as seen through trusted reverse proxies.
type clientInfo struct {
	// IP is the client's address: the peer, or what a trusted proxy says it forwarded.
	IP string
	// HTTPS is whether the client used HTTPS: TLS on this connection, or a trusted
	// proxy's X-Forwarded-Proto.
	HTTPS bool
}

// client returns what the forwarded middleware found out about r's client.
func client(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey).(clientInfo)
	return ci
}

// ParseTrustedProxies parses a comma-separated list of CIDRs or single addresses.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// normalizeBaseURL checks a public base URL and returns it as scheme://host[:port]. A
// path is refused: sheetq's links are absolute paths, so it must be served at the root
// of its host.
func normalizeBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--base-url %q: want an absolute http:// or https:// URL such as https://sheetq.example.com/", raw)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--base-url %q: sheetq must be served at the root of its host (no path, query or user)", raw)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// trusted reports whether addr is one of the configured proxies.
func (s *server) trusted(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// forwarded records the client's address and scheme in the context. X-Forwarded-For,
// -Proto and -Host are believed only from a trusted proxy, since anyone can send them;
// then the forwarded host also becomes r.Host, so the Host check and the cross-origin
// check see the name the browser used.
func (s *server) forwarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ci := clientInfo{IP: hostOf(r.RemoteAddr), HTTPS: r.TLS != nil}
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && len(s.cfg.TrustedProxies) > 0 && s.trusted(ap.Addr()) {
			ci.IP = s.forwardedFor(r.Header.Values("X-Forwarded-For"), ap.Addr().Unmap())
			if p := lastValue(r.Header.Values("X-Forwarded-Proto")); p != "" {
				ci.HTTPS = strings.EqualFold(p, "https")
			}
			if h := lastValue(r.Header.Values("X-Forwarded-Host")); h != "" {
				r.Host = h
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey, ci)))
	})
}

// forwardedFor walks X-Forwarded-For from the right (the nearest hop) past the trusted
// proxies; the first address no proxy of ours vouches for is the client. Entries to its
// left were written by the client itself and are ignored.
func (s *server) forwardedFor(values []string, peer netip.Addr) string {
	var hops []string
	for _, v := range values {
		for h := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break // a malformed hop: trust nothing further left
		}
		client = a.Unmap()
		if !s.trusted(client) {
			break
		}
	}
	return client.String()
}

// lastValue is the last comma-separated element of a header's values: the one the
// nearest proxy wrote.
func lastValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	v := values[len(values)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// isHTTPS reports whether the client reached sheetq over HTTPS, directly or through a
// trusted proxy, or the server is published under an https base URL.
func (s *server) isHTTPS(r *http.Request) bool {
	return client(r.Context()).HTTPS || strings.HasPrefix(s.cfg.BaseURL, "https://")
}

// publicOrigin is scheme://host for links shown to people: the base URL when set,
// else what the request says.
func (s *server) publicOrigin(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if client(r.Context()).HTTPS {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// baseHost is the host name of the base URL, lower case, without port ("" when unset).
func (s *server) baseHost() string {
	if s.cfg.BaseURL == "" {
		return ""
	}
	u, err := url.Parse(s.cfg.BaseURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}
