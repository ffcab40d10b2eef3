package middleware

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// ClientInfo is the client of a request as seen through trusted reverse proxies.
type ClientInfo struct {
	// IP is the client's address: the peer, or what a trusted proxy says it forwarded.
	IP string
	// HTTPS is whether the client used HTTPS: TLS on this connection, or a trusted
	// proxy's X-Forwarded-Proto.
	HTTPS bool
}

// Client returns what the forwarded middleware found out about r's client.
func Client(ctx context.Context) ClientInfo {
	ci, _ := ctx.Value(clientKey).(ClientInfo)
	return ci
}

// trusted reports whether addr is one of the configured proxies.
func (s *Stack) trusted(addr netip.Addr) bool {
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
func (s *Stack) forwarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ci := ClientInfo{IP: HostOf(r.RemoteAddr), HTTPS: r.TLS != nil}
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
func (s *Stack) forwardedFor(values []string, peer netip.Addr) string {
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

// IsHTTPS reports whether the client reached sheetq over HTTPS, directly or through a
// trusted proxy, or the server is published under an https base URL.
func (s *Stack) IsHTTPS(r *http.Request) bool {
	return Client(r.Context()).HTTPS || strings.HasPrefix(s.cfg.BaseURL, "https://")
}

// PublicOrigin is scheme://host for links shown to people: the base URL when set,
// else what the request says.
func (s *Stack) PublicOrigin(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if Client(r.Context()).HTTPS {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// baseHost is the host name of the base URL, lower case, without port ("" when unset).
func (s *Stack) baseHost() string {
	if s.cfg.BaseURL == "" {
		return ""
	}
	u, err := url.Parse(s.cfg.BaseURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}
