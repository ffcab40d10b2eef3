package export

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"sheetq/internal/envref"
)

// The auth types of an http source.
const (
	authBearer = "bearer"
	authBasic  = "basic"
	authHeader = "header"
	authOAuth2 = "oauth2"
)

// httpAuth sets a request's credentials.
type httpAuth func(*http.Request) error

// httpAuthError is a failure to get credentials (an OAuth2 token); permanent when the
// token endpoint refused the client, so that no retry can help.
type httpAuthError struct {
	err       error
	permanent bool
}

func (e *httpAuthError) Error() string { return e.err.Error() }
func (e *httpAuthError) Unwrap() error { return e.err }

// newHTTPAuth checks an auth table and returns what applies it, with its secrets
// resolved (env:NAME, file:PATH relative to baseDir, or the value itself), and what
// lists them (with an OAuth2 source's current access token), so that no excerpt of an
// answer can show them. tokenClient fetches OAuth2 tokens:
// the source's transport, so the token endpoint is behind the same address guard.
// Messages name keys and variables, never a secret's value.
func newHTTPAuth(a *HTTPAuth, baseDir string, tokenClient *http.Client) (httpAuth, func() []string, error) {
	if a == nil {
		return nil, nil, nil
	}
	fixed := func(secrets ...string) func() []string { return func() []string { return secrets } }
	secret := func(key, v string) (string, error) {
		if v == "" {
			return "", fmt.Errorf("type %s needs %s", a.Type, key)
		}
		s, err := envref.Secret(v, baseDir)
		if err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
		}
		return s, nil
	}
	// extra lists the keys set that the type does not take: a token under basic is a
	// mistake to say, not to ignore.
	extra := func(allowed ...string) error {
		var keys []string
		for _, k := range []struct {
			name string
			set  bool
		}{
			{"token", a.Token != ""}, {"user", a.User != ""}, {"password", a.Password != ""},
			{"name", a.Name != ""}, {"value", a.Value != ""}, {"token_url", a.TokenURL != ""},
			{"client_id", a.ClientID != ""}, {"client_secret", a.ClientSecret != ""}, {"scopes", a.Scopes != nil},
		} {
			if k.set && !slices.Contains(allowed, k.name) {
				keys = append(keys, k.name)
			}
		}
		if len(keys) > 0 {
			return fmt.Errorf("type %s does not take %s", a.Type, strings.Join(keys, ", "))
		}
		return nil
	}
	switch a.Type {
	case authBearer:
		if err := extra("token"); err != nil {
			return nil, nil, err
		}
		token, err := secret("token", a.Token)
		if err != nil {
			return nil, nil, err
		}
		if !validHeaderValue(token) {
			return nil, nil, errors.New("token is not a valid header value (a line break or control character?)")
		}
		return func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}, fixed(token), nil
	case authBasic:
		if err := extra("user", "password"); err != nil {
			return nil, nil, err
		}
		if a.User == "" {
			return nil, nil, errors.New("type basic needs user")
		}
		if strings.Contains(a.User, ":") || !validHeaderValue(a.User) {
			return nil, nil, errors.New("user must not hold a colon or a control character")
		}
		password, err := secret("password", a.Password)
		if err != nil {
			return nil, nil, err
		}
		encoded := base64.StdEncoding.EncodeToString([]byte(a.User + ":" + password))
		return func(r *http.Request) error {
			r.Header.Set("Authorization", "Basic "+encoded)
			return nil
		}, fixed(password, encoded), nil
	case authHeader:
		if err := extra("name", "value"); err != nil {
			return nil, nil, err
		}
		if a.Name == "" {
			return nil, nil, errors.New("type header needs name, the header's name, such as X-API-Key")
		}
		if !validHeaderName(a.Name) {
			return nil, nil, fmt.Errorf("name %q is not a header name", a.Name)
		}
		switch http.CanonicalHeaderKey(a.Name) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Accept", "User-Agent":
			return nil, nil, fmt.Errorf("name %q is a header sheetq sets itself", a.Name)
		}
		value, err := secret("value", a.Value)
		if err != nil {
			return nil, nil, err
		}
		if !validHeaderValue(value) {
			return nil, nil, errors.New("value is not a valid header value (a line break or control character?)")
		}
		name := a.Name
		return func(r *http.Request) error {
			r.Header.Set(name, value)
			return nil
		}, fixed(value), nil
	case authOAuth2:
		if err := extra("token_url", "client_id", "client_secret", "scopes"); err != nil {
			return nil, nil, err
		}
		switch {
		case a.TokenURL == "":
			return nil, nil, errors.New("type oauth2 needs token_url, the token endpoint's URL")
		case a.ClientID == "":
			return nil, nil, errors.New("type oauth2 needs client_id")
		}
		tu, err := url.Parse(a.TokenURL)
		if err != nil || (tu.Scheme != "https" && tu.Scheme != "http") || tu.Host == "" || tu.User != nil {
			return nil, nil, errors.New("token_url must be an absolute http:// or https:// URL without a user or password")
		}
		clientSecret, err := secret("client_secret", a.ClientSecret)
		if err != nil {
			return nil, nil, err
		}
		cc := clientcredentials.Config{ClientID: a.ClientID, ClientSecret: clientSecret, TokenURL: a.TokenURL, Scopes: a.Scopes}
		// The token source keeps its token until shortly before it expires, for every
		// export of the source, and is safe for concurrent use. Its context only carries
		// the client: a token fetch is bounded by the client's timeout.
		ts := cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient))
		var current atomic.Pointer[string] // the access token last sent
		apply := func(r *http.Request) error {
			tok, err := ts.Token()
			if err != nil {
				return tokenError(err)
			}
			current.Store(&tok.AccessToken)
			tok.SetAuthHeader(r)
			return nil
		}
		secrets := func() []string {
			if p := current.Load(); p != nil {
				return []string{clientSecret, *p}
			}
			return []string{clientSecret}
		}
		return apply, secrets, nil
	case "":
		return nil, nil, errors.New("missing type (bearer, basic, header or oauth2)")
	}
	return nil, nil, fmt.Errorf("unknown type %q (want bearer, basic, header or oauth2)", a.Type)
}

// tokenError says why no token came: a refusal by the token endpoint (4xx but 408 and
// 429: a wrong client id or secret, a scope it does not grant) is permanent; the rest
// (unreachable, 5xx) passes. The endpoint's body is left out: it may echo the request.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		what := re.Response.Status
		if re.ErrorCode != "" {
			what += " (" + shorten(re.ErrorCode, 40) + ")"
		}
		permanent := code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
		return &httpAuthError{err: fmt.Errorf("the oauth2 token endpoint answered %s", what), permanent: permanent}
	}
	// Wrapped, so that a token endpoint on a refused address is refused as a page is.
	return &httpAuthError{err: fmt.Errorf("oauth2 token: %w", err)}
}

// authTransport sets the source's credentials on requests to base_url's host, and on
// no other: a redirect to another host goes without them.
type authTransport struct {
	next   http.RoundTripper
	origin string
	auth   httpAuth // nil: none
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.auth == nil || originOf(req.URL) != t.origin {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change the request it is given
	if err := t.auth(r); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// validHeaderName is whether s is an HTTP token (RFC 9110, 5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue is whether s can be a header's value: no control characters but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
