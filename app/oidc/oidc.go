// Package oidc signs people in with OpenID Connect ([oidc] in the config file):
// GET /auth/login sends the browser to the provider (the authorization code flow with
// PKCE, a state and a nonce kept in a short-lived sealed cookie of this browser), and
// GET /auth/callback checks what comes back, exchanges the code, verifies the ID token,
// reads the person's email, name, groups and claims (claims.go) and sets the session
// cookie that app/middleware checks (ARCHITECTURE.md, "People and permissions").
//
// It never logs a secret, a code or a token, and a provider that does not answer is a
// page that says so (502 or 503), never a 500, and never stops the server from starting
// or from serving tokens: discovery happens at the first sign-in, and again at the next
// one after a failure.
package oidc

import (
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"sheetq/app/middleware"
	"sheetq/app/problem"
)

// Defaults of [oidc].
var (
	// DefaultScopes are the scopes asked for when [oidc] scopes is not set.
	DefaultScopes = []string{gooidc.ScopeOpenID, "email", "profile"}
)

// Default claim names.
const (
	DefaultGroupsClaim = "groups"
	DefaultEmailClaim  = "email"
	DefaultNameClaim   = "name"
)

// CallbackPath is where the provider sends the browser back; the redirect URL registered
// with the provider ends with it.
const CallbackPath = "/auth/callback"

// discoveryPause is the least time between two attempts to read a provider's discovery
// document while it fails.
const discoveryPause = 2 * time.Second

// flightTTL is how long a browser has from leaving for the provider to coming back.
const flightTTL = 10 * time.Minute

// flightCookie holds a sign-in in flight: its state, nonce, PKCE verifier, redirect URL
// and the page to go to afterwards, sealed (AES-GCM) with a key derived from the session
// key, so that it can be neither read nor made by anyone else.
const flightCookie = "sheetq_signin"

// Config is [oidc] resolved, and what the sign-in needs from the server.
type Config struct {
	// Issuer is the provider's issuer URL, exactly as its discovery document says it.
	Issuer string
	// ClientID and ClientSecret are the client registered with the provider (the secret
	// already read from env: or file:).
	ClientID, ClientSecret string
	// RedirectURL is the callback URL registered with the provider; "" is the server's
	// public origin (the base URL, else the request's) + CallbackPath.
	RedirectURL string
	// Scopes are asked for (default DefaultScopes).
	Scopes []string
	// GroupsClaim, EmailClaim and NameClaim name the claims that carry the person's
	// groups, email and name (defaults DefaultGroupsClaim, DefaultEmailClaim,
	// DefaultNameClaim).
	GroupsClaim, EmailClaim, NameClaim string
	// Key derives the key that seals the sign-in cookie: the session key.
	Key []byte
	// Middleware sets the session and records sign-ins (its OnSignIn and OnPerson).
	Middleware *middleware.Stack
	// Log receives the sign-ins and why one failed; never a secret, code or token.
	Log *slog.Logger
	// Page shows a page that says why a sign-in was refused (the pages' error page);
	// nil: plain text.
	Page func(w http.ResponseWriter, r *http.Request, status int, title, message string)
	// HTTPClient talks to the provider (default: one with a 15 s timeout).
	HTTPClient *http.Client
	// Now is the clock of the ID token's expiry and the cookie's (default time.Now).
	Now func() time.Time
}

// Handler serves GET /auth/login and GET /auth/callback.
type Handler struct {
	cfg    Config
	claims claimNames
	aead   cipher.AEAD

	// mu guards provider and its last failure: discovered at the first sign-in, again
	// at a sign-in after a failure (not sooner than discoveryPause after it, so that
	// sign-ins while the provider is down do not hammer it).
	mu       sync.Mutex
	provider *gooidc.Provider
	failedAt time.Time
	failure  error

	// used are the states of callbacks already taken, until their cookie expires: a
	// replayed callback is refused before its code reaches the provider.
	used usedStates
}

// New returns the sign-in handler for cfg. It does not talk to the provider.
func New(cfg Config) (*Handler, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("oidc: issuer and client_id are required")
	}
	if len(cfg.Key) == 0 || cfg.Middleware == nil {
		return nil, errors.New("oidc: a session key and the middleware are required")
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = slices.Clone(DefaultScopes)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	m := hmac.New(sha256.New, cfg.Key)
	m.Write([]byte("sheetq sign-in cookie v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, aead: aead, claims: claimNames{
		email:  cmp.Or(cfg.EmailClaim, DefaultEmailClaim),
		name:   cmp.Or(cfg.NameClaim, DefaultNameClaim),
		groups: cmp.Or(cfg.GroupsClaim, DefaultGroupsClaim),
	}}
	h.used.entries = map[string]time.Time{}
	return h, nil
}

// Routes adds the sign-in's routes to mux (public paths of app/middleware).
func (h *Handler) Routes(mux problem.Mux) {
	mux.HandleFunc("GET /auth/login", h.login)
	mux.HandleFunc("GET "+CallbackPath, h.callback)
}

// Label is a provider's name for the sign-in button: the host of its issuer URL.
func Label(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return issuer
	}
	return u.Host
}

// discover returns the provider, reading its discovery document at the first call and
// again after a failure, so that a provider down at start or at a sign-in is tried again
// at the next one.
func (h *Handler) discover(ctx context.Context) (*gooidc.Provider, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.provider != nil {
		return h.provider, nil
	}
	if h.failure != nil && h.cfg.Now().Sub(h.failedAt) < discoveryPause {
		return nil, h.failure
	}
	ctx, cancel := context.WithTimeout(h.client(ctx), 15*time.Second)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, h.cfg.Issuer)
	if err != nil {
		h.failedAt, h.failure = h.cfg.Now(), err
		h.cfg.Log.WarnContext(ctx, "OpenID provider not reachable", "issuer", h.cfg.Issuer, "err", err)
		return nil, err
	}
	h.provider, h.failure = p, nil
	h.cfg.Log.InfoContext(ctx, "OpenID provider discovered", "issuer", h.cfg.Issuer)
	return p, nil
}

// client is ctx carrying the HTTP client that talks to the provider.
func (h *Handler) client(ctx context.Context) context.Context {
	return gooidc.ClientContext(ctx, h.cfg.HTTPClient)
}

// oauth is the OAuth 2 client of provider p, sending the browser back to redirect.
func (h *Handler) oauth(p *gooidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: h.cfg.ClientID, ClientSecret: h.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: h.cfg.Scopes}
}

// redirectURL is the callback URL the provider sends the browser back to.
func (h *Handler) redirectURL(r *http.Request) string {
	if h.cfg.RedirectURL != "" {
		return h.cfg.RedirectURL
	}
	return h.cfg.Middleware.PublicOrigin(r) + CallbackPath
}

// flight is a sign-in in flight, kept in the browser's flightCookie.
type flight struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Redirect string `json:"r"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"`
}

// login sends the browser to the provider, with a fresh state, nonce and PKCE verifier
// kept in the flight cookie; next (checked by middleware.SafeNext) is where the browser
// goes once signed in.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	next := middleware.SafeNext(r.URL.Query().Get("next"))
	p, err := h.discover(r.Context())
	if err != nil {
		h.providerDown(w, r)
		return
	}
	f := flight{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(),
		Redirect: h.redirectURL(r), Next: next, Expires: h.cfg.Now().Add(flightTTL).Unix()}
	value, err := h.seal(f)
	if err != nil {
		h.page(w, r, http.StatusInternalServerError, "Could not start the sign-in", "The server could not start the sign-in; its log says why.")
		h.cfg.Log.ErrorContext(r.Context(), "seal the sign-in cookie", "err", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flightCookie, Value: value, Path: "/auth/", MaxAge: int(flightTTL.Seconds()),
		HttpOnly: true, Secure: h.cfg.Middleware.IsHTTPS(r), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, h.oauth(p, f.Redirect).AuthCodeURL(f.State, gooidc.Nonce(f.Nonce),
		oauth2.S256ChallengeOption(f.Verifier)), http.StatusSeeOther)
}

// callback finishes a sign-in: the state must be this browser's flight's and not used
// before, the code is exchanged with the flight's verifier, the ID token verified (issuer,
// audience, expiry, signature) and its nonce checked, the person's claims read (from
// userinfo too when the ID token has no email or no groups), and the session set.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	mw := h.cfg.Middleware
	q := r.URL.Query()
	// The flight is over whatever happens next: one cookie, one callback.
	http.SetCookie(w, &http.Cookie{Name: flightCookie, Value: "", Path: "/auth/", MaxAge: -1,
		HttpOnly: true, Secure: mw.IsHTTPS(r), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	// Callbacks that match no sign-in of this browser count with wrong tokens
	// (app/middleware, ratelimit.go): an address that sends many is refused for a while,
	// before anything is checked or recorded, so that it cannot fill the audit log.
	if wait, locked := mw.Auth().Locked(middleware.Client(ctx).IP); locked {
		w.Header().Set("Retry-After", strconv.Itoa(middleware.RetryAfterSeconds(wait)))
		h.page(w, r, http.StatusTooManyRequests, "Too many failed sign-ins",
			"Too many sign-ins failed from your address. Try again in a few minutes.")
		return
	}
	f, ok := h.readFlight(r)
	if !ok {
		mw.SignInFailed(r)
		h.refuse(w, r, http.StatusBadRequest, "", "no sign-in in flight",
			"This sign-in has expired",
			"This sign-in was not started in this browser, or took longer than 10 minutes, or was finished in another tab. "+
				"Go back to the sign-in page and start again.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		mw.SignInFailed(r)
		h.refuse(w, r, http.StatusBadRequest, "", "state mismatch",
			"This sign-in does not match",
			"The answer from your provider does not belong to the sign-in this browser started. "+
				"Go back to the sign-in page and start again.")
		return
	}
	if !h.used.take(f.State, time.Unix(f.Expires, 0), h.cfg.Now()) {
		mw.SignInFailed(r)
		h.refuse(w, r, http.StatusBadRequest, "", "callback replayed",
			"This sign-in was already used",
			"This sign-in link has already been used once. Go back to the sign-in page and start again.")
		return
	}
	// The provider's answer is this browser's: an error it sends is its refusal.
	if e := q.Get("error"); e != "" {
		h.refuse(w, r, http.StatusForbidden, "", "provider refused: "+printable(e, 64),
			"The sign-in was not completed",
			"Your provider did not sign you in ("+printable(e, 64)+"). Go back to the sign-in page and try again, "+
				"or ask whoever runs this server whether your account may use sheetq.")
		return
	}
	code := q.Get("code")
	if code == "" {
		h.refuse(w, r, http.StatusBadRequest, "", "no code", "The sign-in was not completed",
			"Your provider sent no authorization code. Go back to the sign-in page and start again.")
		return
	}
	p, err := h.discover(ctx)
	if err != nil {
		h.providerDown(w, r)
		return
	}
	pctx, cancel := context.WithTimeout(h.client(ctx), 30*time.Second)
	defer cancel()
	tok, err := h.oauth(p, f.Redirect).Exchange(pctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			// The provider answered, and refused the code: used already, expired, or
			// another client's. Its error code says which; the body is not logged.
			h.cfg.Log.WarnContext(ctx, "OpenID provider refused the code", "error_code", re.ErrorCode)
			h.refuse(w, r, http.StatusBadRequest, "", "code refused: "+printable(re.ErrorCode, 64),
				"Your provider refused the sign-in",
				"The provider did not accept this sign-in's code (it may have expired or been used already). "+
					"Go back to the sign-in page and start again.")
			return
		}
		h.unreachable(w, r, "exchange the code", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		h.refuse(w, r, http.StatusBadGateway, "", "no ID token", "Your provider sent no ID token",
			"The provider answered without an ID token: check that the scopes in [oidc] include openid.")
		return
	}
	// The provider's own key set, fetched once and again when a token names a key it
	// does not know (the provider rotated its keys).
	idt, err := p.Verifier(&gooidc.Config{ClientID: h.cfg.ClientID, Now: h.cfg.Now}).Verify(pctx, raw)
	if err != nil {
		h.cfg.Log.WarnContext(ctx, "OpenID ID token not verified", "err", err)
		h.refuse(w, r, http.StatusBadGateway, "", "ID token not verified", "Your provider's answer could not be verified",
			"The ID token from the provider could not be verified (the server's log says why: often a wrong issuer or client_id in [oidc]). "+
				"Try again; if it keeps failing, tell whoever runs this server.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		mw.SignInFailed(r)
		h.refuse(w, r, http.StatusBadRequest, "", "nonce mismatch", "This sign-in does not match",
			"The ID token from your provider was not issued for the sign-in this browser started. Go back to the sign-in page and start again.")
		return
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		h.unreachable(w, r, "read the ID token's claims", err)
		return
	}
	_, hasEmail := claims[h.claims.email]
	_, hasGroups := claims[h.claims.groups]
	if !hasEmail || !hasGroups {
		// Many providers keep the profile, or the groups, out of the ID token: userinfo
		// has them.
		if err := h.userinfo(pctx, p, tok, idt.Subject, claims); err != nil {
			h.unreachable(w, r, "read userinfo", err)
			return
		}
	}
	h.finish(w, r, f, claims)
}

// userinfo adds the claims of the provider's userinfo endpoint that the ID token lacks;
// it must name the same subject.
func (h *Handler) userinfo(ctx context.Context, p *gooidc.Provider, tok *oauth2.Token, subject string, claims map[string]any) error {
	if p.UserInfoEndpoint() == "" {
		return nil // nothing more to learn; the email's absence is refused next
	}
	ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return err
	}
	if ui.Subject != subject {
		return fmt.Errorf("userinfo names subject %q, the ID token %q", ui.Subject, subject)
	}
	more := map[string]any{}
	if err := ui.Claims(&more); err != nil {
		return err
	}
	for k, v := range more {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return nil
}

// finish signs the person named by claims in: their identity, trimmed to fit a cookie;
// OnPerson and OnSignIn, either of which may refuse; the session; then the page they
// wanted.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, f flight, claims map[string]any) {
	mw := h.cfg.Middleware
	id, err := h.claims.identity(claims)
	switch {
	case errors.Is(err, errNoEmail):
		h.refuse(w, r, http.StatusForbidden, "", "no email", "Your provider sent no email address",
			"sheetq names people by their email, and your provider sent none in the claim "+quote(h.claims.email)+
				". Ask whoever runs this server to add the email scope, or to set [oidc] email_claim.")
		return
	case errors.Is(err, errUnverified):
		email, _ := claims[h.claims.email].(string)
		h.refuse(w, r, http.StatusForbidden, printable(email, maxEmail), "email not verified", "Your email address is not verified",
			"Your provider says that your email address is not verified. Verify it with your provider, then sign in again.")
		return
	}
	if names, ok := claims["_claim_names"].(map[string]any); ok && names[h.claims.groups] != nil {
		// Entra ID's "overage": past 200 groups it names where to fetch them instead,
		// which needs another API's token. The person gets [[people]]'s groups only.
		h.cfg.Log.WarnContext(r.Context(), "the provider sent no groups, only where to fetch them (too many groups): assign fewer groups to the application",
			"person", id.Email, "claim", h.claims.groups)
	}
	var value string
	var expires time.Time
	for {
		value, expires, err = mw.Auth().NewPersonSession(id)
		if !errors.Is(err, middleware.ErrSessionTooLarge) || !dropLargestClaim(&id) {
			break
		}
	}
	if errors.Is(err, middleware.ErrSessionTooLarge) {
		h.refuse(w, r, http.StatusForbidden, id.Email, fmt.Sprintf("too many groups (%d)", len(id.Groups)),
			"Your provider sent too many groups",
			fmt.Sprintf("Your provider sent %d groups in the claim %s, more than a session can hold. "+
				"Ask whoever runs this server to send only the groups sheetq needs (a group filter at the provider), "+
				"or to point [oidc] groups_claim at a shorter claim and give groups with [[people]].", len(id.Groups), quote(h.claims.groups)))
		return
	}
	if err != nil {
		h.cfg.Log.ErrorContext(r.Context(), "person session", "err", err)
		h.page(w, r, http.StatusInternalServerError, "Could not sign you in", "The server could not make your session; its log says why.")
		return
	}
	who := mw.Auth().PersonWho(id)
	if err := mw.PersonSignedIn(r.Context(), id, who); err != nil {
		h.notRecorded(w, r)
		return
	}
	if err := mw.RecordSignIn(r, middleware.SignInEvent{Actor: who.Name, OK: true, Detail: "oidc", Who: who}); err != nil {
		h.notRecorded(w, r)
		return
	}
	mw.SetSession(w, r, value, expires)
	h.cfg.Log.InfoContext(r.Context(), "signed in", "person", who.Name, "role", who.Role, "groups", len(who.Groups),
		"client_ip", middleware.Client(r.Context()).IP)
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// refuse answers a failed sign-in with a page, after recording it (OnSignIn): actor is
// the person's email when known, detail says why for the record.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, actor, detail, title, message string) {
	h.cfg.Log.WarnContext(r.Context(), "sign-in refused", "person", actor, "reason", detail,
		"client_ip", middleware.Client(r.Context()).IP)
	if err := h.cfg.Middleware.RecordSignIn(r, middleware.SignInEvent{Actor: actor, Detail: "oidc: " + detail}); err != nil {
		h.notRecorded(w, r)
		return
	}
	h.page(w, r, status, title, message)
}

// notRecorded refuses a sign-in that OnSignIn or OnPerson could not record.
func (h *Handler) notRecorded(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, http.StatusServiceUnavailable, "Could not record the sign-in",
		"Sign-ins are recorded, and this one could not be (the server's log says why), so it was refused. "+
			"Try again in a minute; if it keeps failing, tell whoever runs this server.")
}

// providerDown answers a sign-in whose provider's discovery document could not be read
// (discover logged why): 503, tried again at the next sign-in. Nobody has tried to sign
// in yet, so nothing is recorded: an outage is not a failed sign-in.
func (h *Handler) providerDown(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "60")
	h.page(w, r, http.StatusServiceUnavailable, "Your sign-in provider is not answering",
		"sheetq could not reach the sign-in provider at "+h.cfg.Issuer+". Try again in a minute. "+
			"Scripts and administrators with an access token can still use sheetq; if this lasts, tell whoever runs this server "+
			"(its log says what went wrong).")
}

// unreachable answers a sign-in that failed talking to the provider after discovery:
// 502.
func (h *Handler) unreachable(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.cfg.Log.WarnContext(r.Context(), "OpenID provider failed", "step", what, "issuer", h.cfg.Issuer, "err", err)
	h.refuse(w, r, http.StatusBadGateway, "", "provider failed to "+what, "Your sign-in provider did not answer",
		"sheetq could not "+what+" with the sign-in provider at "+h.cfg.Issuer+". "+
			"Go back to the sign-in page and try again in a minute; if it keeps failing, tell whoever runs this server.")
}

// page shows a page in the layout (Config.Page), or plain text.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	w.Header().Set("Cache-Control", "no-store")
	if h.cfg.Page == nil {
		http.Error(w, title+": "+message, status)
		return
	}
	h.cfg.Page(w, r, status, title, message)
}

// seal encrypts and signs a flight for its cookie.
func (h *Handler) seal(f flight) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, h.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(h.aead.Seal(nonce, nonce, b, []byte(flightCookie))), nil
}

// readFlight is the request's unexpired flight, when its cookie is one this server
// sealed.
func (h *Handler) readFlight(r *http.Request) (flight, bool) {
	c, err := r.Cookie(flightCookie)
	if err != nil || len(c.Value) > 4096 {
		return flight{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	ns := h.aead.NonceSize()
	if err != nil || len(b) < ns {
		return flight{}, false
	}
	plain, err := h.aead.Open(nil, b[:ns], b[ns:], []byte(flightCookie))
	if err != nil {
		return flight{}, false
	}
	var f flight
	if json.Unmarshal(plain, &f) != nil || f.State == "" || h.cfg.Now().Unix() >= f.Expires {
		return flight{}, false
	}
	return f, true
}

// usedStates are the states of the callbacks taken, each until its flight expires.
type usedStates struct {
	mu      sync.Mutex
	entries map[string]time.Time
}

// maxUsedStates bounds the states remembered: beyond it the oldest are forgotten, and a
// replay of one of those still fails at the provider, which takes a code once.
const maxUsedStates = 100_000

// take marks state used until expires and reports whether it was not already.
func (u *usedStates) take(state string, expires, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.entries[state]; ok {
		return false
	}
	if len(u.entries) >= maxUsedStates {
		for s, exp := range u.entries {
			if !now.Before(exp) {
				delete(u.entries, s)
			}
		}
		for s := range u.entries {
			if len(u.entries) < maxUsedStates {
				break
			}
			delete(u.entries, s)
		}
	}
	u.entries[state] = expires
	return true
}

// printable is s without control characters, cut to n bytes: for a provider's error
// code shown on a page and in the log.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return truncate(s, n)
}

// quote is a claim's name as the pages show it.
func quote(s string) string { return `"` + s + `"` }
