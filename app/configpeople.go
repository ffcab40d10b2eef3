package app

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/app/oidc"
)

// OIDCConfig is the [oidc] table: people sign in with an OpenID Connect provider
// (docs/self-hosting.md, "Signing in with your company account").
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (https://, or http:// on loopback), exactly as
	// its discovery document says it.
	Issuer string `toml:"issuer"`
	// ClientID is the client registered with the provider.
	ClientID string `toml:"client_id"`
	// ClientSecret is the client's secret: a literal, env:NAME or file:PATH; "" for a
	// public client (PKCE alone).
	ClientSecret string `toml:"client_secret"`
	// RedirectURL is the callback URL registered with the provider, ending in
	// /auth/callback (default: --base-url + /auth/callback, else the request's origin).
	RedirectURL string `toml:"redirect_url"`
	// Scopes are asked for (default openid, email, profile); openid is required.
	Scopes []string `toml:"scopes"`
	// GroupsClaim, EmailClaim and NameClaim name the claims that carry the person's
	// groups, email and name (default groups, email, name).
	GroupsClaim string `toml:"groups_claim"`
	EmailClaim  string `toml:"email_claim"`
	NameClaim   string `toml:"name_claim"`
	// ButtonLabel is the sign-in button's "Sign in with LABEL" (default the issuer's host).
	ButtonLabel string `toml:"button_label"`
}

// set reports whether the file has an [oidc] table with anything in it.
func (o OIDCConfig) set() bool {
	return o.Issuer != "" || o.ClientID != "" || o.ClientSecret != "" || o.RedirectURL != "" || len(o.Scopes) > 0 ||
		o.GroupsClaim != "" || o.EmailClaim != "" || o.NameClaim != "" || o.ButtonLabel != ""
}

// PersonConfig is one [[people]] entry.
type PersonConfig struct {
	// Email names the person (compared without regard to case).
	Email string `toml:"email"`
	// Role is "member" (the default for people) or "admin".
	Role string `toml:"role"`
	// Groups are added to the groups the provider sends.
	Groups []string `toml:"groups"`
	// Attrs are the person's attributes; they win over the provider's claims.
	Attrs map[string]string `toml:"attrs"`
}

// AccessConfig is the [access] table.
type AccessConfig struct {
	// Default is who may run a report without an "-- access:" line: "everyone" (the
	// default: every signed-in person) or "admins".
	Default string `toml:"default"`
}

// Policy is what [access] says of reports without an "-- access:" line; call it on a
// file that Resolve accepted (an unknown default reads as "everyone").
func (a AccessConfig) Policy() access.Policy {
	return access.Policy{AdminsOnly: strings.EqualFold(strings.TrimSpace(a.Default), "admins")}
}

// check refuses an [access] default other than "everyone" or "admins".
func (a AccessConfig) check(fc FileConfig) error {
	switch strings.ToLower(strings.TrimSpace(a.Default)) {
	case "", "everyone", "admins":
		return nil
	}
	return fc.Errorf(`[access] default %q: use "everyone" or "admins"`, a.Default)
}

// signIn is the [oidc] and [[people]] tables resolved: nil oidc without [oidc].
type signIn struct {
	oidc   *oidc.Config
	people *middleware.OIDC
}

// resolveSignIn checks [oidc] and [[people]] and resolves them (the client secret read,
// the defaults filled, the redirect URL from baseURL when not given). A mistake names the
// file and the key.
func resolveSignIn(fc FileConfig, baseURL string) (signIn, error) {
	o := fc.OIDC
	if !o.set() {
		if len(fc.People) > 0 {
			return signIn{}, fc.Errorf("[[people]] gives roles to people who sign in with OpenID Connect, but there is no [oidc] table")
		}
		return signIn{}, nil
	}
	issuer := strings.TrimSpace(o.Issuer)
	if err := checkProviderURL(issuer); err != nil {
		return signIn{}, fc.Errorf("[oidc] issuer %q: %w", o.Issuer, err)
	}
	if strings.TrimSpace(o.ClientID) == "" {
		return signIn{}, fc.Errorf("[oidc] client_id is required: the client registered with the provider")
	}
	secret, err := ResolveSecret(o.ClientSecret)
	if err != nil {
		return signIn{}, fc.Errorf("[oidc] client_secret: %w", err)
	}
	redirect := strings.TrimSpace(o.RedirectURL)
	if redirect != "" {
		u, err := url.Parse(redirect)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != oidc.CallbackPath || u.RawQuery != "" {
			return signIn{}, fc.Errorf("[oidc] redirect_url %q: want this server's URL ending in %s, such as https://sheetq.example.com%s",
				o.RedirectURL, oidc.CallbackPath, oidc.CallbackPath)
		}
	} else if baseURL != "" {
		redirect = baseURL + oidc.CallbackPath
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		return signIn{}, fc.Errorf(`[oidc] scopes must include "openid"`)
	}
	for _, c := range []struct{ key, v string }{{"groups_claim", o.GroupsClaim}, {"email_claim", o.EmailClaim}, {"name_claim", o.NameClaim}} {
		if c.v != "" && strings.TrimSpace(c.v) != c.v {
			return signIn{}, fc.Errorf("[oidc] %s %q: a claim's name has no spaces around it", c.key, c.v)
		}
	}
	people, err := resolvePeople(fc)
	if err != nil {
		return signIn{}, err
	}
	clientID := strings.TrimSpace(o.ClientID)
	label := strings.TrimSpace(o.ButtonLabel)
	if label == "" {
		label = oidc.Label(issuer)
	}
	return signIn{
		oidc: &oidc.Config{Issuer: issuer, ClientID: clientID, ClientSecret: secret, RedirectURL: redirect,
			Scopes: o.Scopes, GroupsClaim: o.GroupsClaim, EmailClaim: o.EmailClaim, NameClaim: o.NameClaim},
		// A session is bound to the provider and the client: changing either signs
		// everyone out.
		people: &middleware.OIDC{Provider: issuer + "\x00" + clientID, Label: label, People: people},
	}, nil
}

// checkProviderURL refuses an issuer that is not an absolute https:// URL (http:// only
// on this machine, for a test provider).
func checkProviderURL(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case issuer == "":
		return fmt.Errorf("required: the provider's issuer URL, such as https://accounts.google.com")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("want the provider's https:// URL, such as https://accounts.google.com")
	case u.Scheme == "http" && !middleware.IsLoopbackHost(strings.ToLower(u.Hostname())):
		return fmt.Errorf("an issuer must be https:// (http:// only on this machine)")
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("an issuer URL has no query or fragment")
	}
	return nil
}

// resolvePeople checks [[people]]: an email each, once, and a known role ("" is member).
func resolvePeople(fc FileConfig) ([]middleware.Person, error) {
	seen := map[string]bool{}
	var out []middleware.Person
	for i, p := range fc.People {
		email := strings.ToLower(strings.TrimSpace(p.Email))
		if local, domain, ok := strings.Cut(email, "@"); !ok || local == "" || domain == "" {
			return nil, fc.Errorf("[[people]] number %d: email %q is not an email address", i+1, p.Email)
		}
		if seen[email] {
			return nil, fc.Errorf("[[people]] %q is given twice", email)
		}
		seen[email] = true
		role := access.Member
		if strings.TrimSpace(p.Role) != "" {
			r, ok := access.ParseRole(p.Role)
			if !ok {
				return nil, fc.Errorf(`[[people]] %q: role %q: use "admin" or "member"`, email, p.Role)
			}
			role = r
		}
		if err := checkAttrs(p.Attrs); err != nil {
			return nil, fc.Errorf("[[people]] %q: attrs: %w", email, err)
		}
		out = append(out, middleware.Person{Email: email, Role: role, Groups: access.NormalizeGroups(p.Groups), Attrs: p.Attrs})
	}
	return out, nil
}

// checkAttrs refuses an attribute with a blank name.
func checkAttrs(attrs map[string]string) error {
	for k := range attrs {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("an attribute needs a name")
		}
	}
	return nil
}

// AccessPolicy is what the config file's [access] says of reports without an
// "-- access:" line.
func (s *Settings) AccessPolicy() access.Policy { return s.cfg.File.Access.Policy() }
