package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"sheetq/app/access"
)

// People sign in with OpenID Connect (app/oidc does the sign-in); this file is what the
// middleware keeps of them: their session cookie, whom it signs in, and the hooks that
// record sign-ins.

// Person is what the config file's [[people]] gives the person with an email, on top of
// what the provider says of them.
type Person struct {
	// Email names the person (compared without regard to case).
	Email string
	// Role is the person's role; "" is member.
	Role access.Role
	// Groups are added to those the provider sends.
	Groups []string
	// Attrs are the person's attributes, for a report's "from=person.NAME" parameters;
	// they win over the provider's claims of the same name.
	Attrs map[string]string
}

// OIDC is what the middleware needs to accept the sessions of people signed in with
// OpenID Connect.
type OIDC struct {
	// Provider names the OpenID provider and the client (issuer and client id). A
	// person's session is bound to it: another provider or client signs everyone out.
	Provider string
	// Label is the sign-in button's text ("Sign in with LABEL").
	Label string
	// People are the config file's [[people]].
	People []Person
}

// Identity is what a person's session cookie carries: what the provider said of them,
// and nothing the configuration adds, which is applied at each request (PersonWho) so
// that a change of [[people]] takes effect at once.
type Identity struct {
	// Email is the person's email, lower case: their name everywhere (access.Who.Name).
	Email string `json:"e"`
	// Display is the person's name, for the pages.
	Display string `json:"d,omitempty"`
	// Groups are the groups the provider sends.
	Groups []string `json:"g,omitempty"`
	// Claims are the provider's string-valued claims, bounded (app/oidc).
	Claims map[string]string `json:"c,omitempty"`
}

// MaxSessionValue bounds a session cookie's value: with its name and attributes it stays
// under the 4,096 bytes that browsers keep of a cookie.
const MaxSessionValue = 3500

// ErrSessionTooLarge is NewPersonSession's refusal of an identity whose cookie would be
// longer than MaxSessionValue.
var ErrSessionTooLarge = errors.New("the session does not fit in a cookie")

// personSessionPrefix starts a person's session cookie value; a token's never starts so
// (its first part is a token name in base64, which cannot be "p1").
const personSessionPrefix = "p1."

// peopleAuth is the Auth's part for people.
type peopleAuth struct {
	provider string
	label    string
	byEmail  map[string]Person // by lower-case email
}

func newPeopleAuth(o OIDC) *peopleAuth {
	p := &peopleAuth{provider: o.Provider, label: o.Label, byEmail: map[string]Person{}}
	for _, person := range o.People {
		p.byEmail[strings.ToLower(strings.TrimSpace(person.Email))] = person
	}
	return p
}

// ProviderLabel is the sign-in button's text, or "" when the server has no OpenID
// provider.
func (a *Auth) ProviderLabel() string {
	if a.people == nil {
		return ""
	}
	return a.people.label
}

// PersonWho is whom a person with identity id acts as: what the provider said, with the
// role, groups and attributes their [[people]] entry adds; a person without one is a
// member.
func (a *Auth) PersonWho(id Identity) access.Who {
	email := strings.ToLower(strings.TrimSpace(id.Email))
	who := access.Who{Kind: access.Person, Name: email, Display: id.Display, Role: access.Member,
		Groups: access.NormalizeGroups(id.Groups), Claims: maps.Clone(id.Claims)}
	if a.people == nil {
		return who
	}
	if p, ok := a.people.byEmail[email]; ok {
		if p.Role != "" {
			who.Role = p.Role
		}
		who.Groups = access.NormalizeGroups(append(slices.Clone(who.Groups), p.Groups...))
		who.Attrs = maps.Clone(p.Attrs)
	}
	return who
}

// personMAC signs a person's session: the provider, the identity as sent, the expiry and
// the person's session generation.
func (a *Auth) personMAC(payload string, expiry int64, gen uint64) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "sheetq person session v1\x00%s\x00%s\x00%d\x00%d", a.people.provider, payload, expiry, gen)
	return m.Sum(nil)
}

// NewPersonSession returns a session cookie value for a person signed in with identity
// id, of the person's current session generation, valid for SessionTTL:
// p1.identity.expiry.generation.mac, base64url. An identity too large for a cookie is
// ErrSessionTooLarge.
func (a *Auth) NewPersonSession(id Identity) (value string, expires time.Time, err error) {
	if a.people == nil {
		return "", time.Time{}, errors.New("no OpenID provider is configured")
	}
	id.Email = strings.ToLower(strings.TrimSpace(id.Email))
	if id.Email == "" {
		return "", time.Time{}, errors.New("a person's session needs an email")
	}
	b, err := json.Marshal(id)
	if err != nil {
		return "", time.Time{}, err
	}
	enc := base64.RawURLEncoding
	payload := enc.EncodeToString(b)
	expires = a.now().Add(SessionTTL).Truncate(time.Second)
	exp, gen := expires.Unix(), a.gens.of(id.Email)
	value = personSessionPrefix + payload + "." + strconv.FormatInt(exp, 10) + "." + strconv.FormatUint(gen, 10) + "." +
		enc.EncodeToString(a.personMAC(payload, exp, gen))
	if len(value) > MaxSessionValue {
		return "", time.Time{}, fmt.Errorf("%w (%d bytes, at most %d)", ErrSessionTooLarge, len(value), MaxSessionValue)
	}
	return value, expires, nil
}

// personSession returns whom a valid, unexpired person's session cookie value of the
// person's current generation signs in.
func (a *Auth) personSession(value string) (access.Who, bool) {
	if a.people == nil || len(value) > 2*MaxSessionValue {
		return access.Who{}, false
	}
	parts := strings.Split(strings.TrimPrefix(value, personSessionPrefix), ".")
	if len(parts) != 4 {
		return access.Who{}, false
	}
	enc := base64.RawURLEncoding
	exp, err1 := strconv.ParseInt(parts[1], 10, 64)
	gen, err2 := strconv.ParseUint(parts[2], 10, 64)
	mac, err3 := enc.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || a.now().Unix() >= exp ||
		!hmac.Equal(mac, a.personMAC(parts[0], exp, gen)) {
		return access.Who{}, false
	}
	b, err := enc.DecodeString(parts[0])
	if err != nil {
		return access.Who{}, false
	}
	var id Identity
	if err := json.Unmarshal(b, &id); err != nil || id.Email == "" || gen != a.gens.of(id.Email) {
		return access.Who{}, false
	}
	return a.PersonWho(id), true
}

// SignInEvent is one sign-in or failed sign-in, through the token form or OpenID
// Connect, for Config.OnSignIn (the audit log).
type SignInEvent struct {
	// Actor is the token's name or the person's email; "" when unknown (a wrong token, a
	// callback that failed before the provider named anyone). Never a secret.
	Actor string
	// IP is the client's address, as seen through trusted proxies.
	IP string
	// OK says whether the sign-in succeeded.
	OK bool
	// Detail says how one signed in ("token", "oidc") or why it failed.
	Detail string
	// Who is whom a successful sign-in acts as; zero for a failed one.
	Who access.Who
}

// ErrSignInNotRecorded wraps Config.OnSignIn's and OnPerson's errors: the sign-in is
// refused, since it could not be recorded.
var ErrSignInNotRecorded = errors.New("could not record the sign-in")

// RecordSignIn passes a sign-in or a failed one to Config.OnSignIn, filling in the
// client's address; an error (wrapping ErrSignInNotRecorded) means the sign-in must be
// refused.
func (s *Stack) RecordSignIn(r *http.Request, ev SignInEvent) error {
	if s.cfg.OnSignIn == nil {
		return nil
	}
	if ev.IP == "" {
		ev.IP = Client(r.Context()).IP
	}
	if err := s.cfg.OnSignIn(r.Context(), ev); err != nil {
		s.cfg.Log.ErrorContext(r.Context(), "sign-in not recorded: refused", "actor", ev.Actor, "client_ip", ev.IP, "err", err)
		return fmt.Errorf("%w: %w", ErrSignInNotRecorded, err)
	}
	return nil
}

// PersonSignedIn passes a person who signed in with OpenID Connect to Config.OnPerson;
// an error (wrapping ErrSignInNotRecorded) means the sign-in must be refused.
func (s *Stack) PersonSignedIn(ctx context.Context, id Identity, who access.Who) error {
	if s.cfg.OnPerson == nil {
		return nil
	}
	if err := s.cfg.OnPerson(ctx, id, who); err != nil {
		s.cfg.Log.ErrorContext(ctx, "person not recorded: sign-in refused", "person", who.Name, "err", err)
		return fmt.Errorf("%w: %w", ErrSignInNotRecorded, err)
	}
	return nil
}

// SafeNext keeps a post-sign-in redirect on this server: a path, not a URL or a
// protocol-relative //host that would send the user elsewhere ("/" instead). Control
// characters are refused anywhere: a browser drops a tab or a line break from a
// Location, so "/\t/host" would arrive as "//host".
func SafeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "/"
	}
	return next
}
