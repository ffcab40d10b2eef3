package oidc

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"sheetq/app/access"
	"sheetq/app/middleware"
)

// Bounds on what a person's session keeps of the provider's claims: the session is a
// cookie (middleware.MaxSessionValue), and a claim is for the pages and for a report's
// "from=person.NAME" parameters, not a store of the provider's data.
const (
	maxEmail      = 254 // the longest address SMTP carries (RFC 5321)
	maxDisplay    = 200
	maxGroupName  = 256
	maxClaims     = 32
	maxClaimName  = 64
	maxClaimValue = 256
)

// mechanics are the ID token's claims that say how it was issued rather than who it
// names: the session keeps none of them.
var mechanics = map[string]bool{
	"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "auth_time": true, "nonce": true,
	"at_hash": true, "c_hash": true, "s_hash": true, "azp": true, "jti": true, "sid": true, "acr": true,
	"amr": true, "_claim_names": true, "_claim_sources": true,
	// Microsoft Entra ID's internal ones.
	"aio": true, "rh": true, "uti": true,
}

// claimNames are the claims that carry a person's email, name and groups ([oidc]
// email_claim, name_claim, groups_claim).
type claimNames struct {
	email, name, groups string
}

// errNoEmail and errUnverified refuse a person the provider gives no usable email.
var (
	errNoEmail    = errors.New("no email")
	errUnverified = errors.New("email not verified")
)

// identity reads a person's identity from the claims of their ID token and userinfo: the
// email (required, and not marked unverified), the name, the groups (a list of strings
// or one string) and the string-valued claims, bounded.
func (n claimNames) identity(claims map[string]any) (middleware.Identity, error) {
	email, _ := claims[n.email].(string)
	email = strings.ToLower(strings.TrimSpace(email))
	if !plausibleEmail(email) {
		return middleware.Identity{}, errNoEmail
	}
	if !verified(claims["email_verified"]) {
		return middleware.Identity{}, errUnverified
	}
	return middleware.Identity{
		Email:   email,
		Display: displayName(claims, n.name, email),
		Groups:  groupsOf(claims[n.groups]),
		Claims:  stringClaims(claims),
	}, nil
}

// plausibleEmail reports whether s can be a person's email: one '@' with something on
// each side, no space or control character, at most maxEmail bytes. The provider vouches
// for the address; this keeps out what cannot be one (a subject id under a wrong
// email_claim).
func plausibleEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && domain != "" && !strings.Contains(domain, "@") && len(s) <= maxEmail &&
		utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// verified reports whether an email_verified claim allows the email: absent (many
// providers send none), true, or the string "true" (some send strings).
func verified(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return v
	case string:
		return !strings.EqualFold(strings.TrimSpace(v), "false")
	}
	return true
}

// displayName is the person's name for the pages: the name claim, else given and family
// names, else the preferred username, else the email.
func displayName(claims map[string]any, nameClaim, email string) string {
	str := func(k string) string { s, _ := claims[k].(string); return strings.TrimSpace(s) }
	name := cmp.Or(str(nameClaim), strings.TrimSpace(str("given_name")+" "+str("family_name")), str("preferred_username"), email)
	return truncate(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name), maxDisplay)
}

// groupsOf reads a groups claim: a list of strings (other elements are skipped) or a
// single string, which is one group. Names longer than maxGroupName are skipped; the
// rest are trimmed, each once, sorted.
func groupsOf(v any) []string {
	var raw []string
	switch v := v.(type) {
	case string:
		raw = []string{v}
	case []string:
		raw = v
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	raw = slices.DeleteFunc(raw, func(s string) bool {
		return len(s) > maxGroupName || strings.ContainsFunc(s, unicode.IsControl)
	})
	return access.NormalizeGroups(raw)
}

// stringClaims are the string-valued claims that say who the person is, for
// access.Who.Claims: not the token's mechanics, none longer than maxClaimValue or named
// by more than maxClaimName, at most maxClaims of them (the first by name).
func stringClaims(claims map[string]any) map[string]string {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(claims)) {
		s, ok := claims[k].(string)
		if !ok || mechanics[k] || k == "" || len(k) > maxClaimName || len(s) > maxClaimValue ||
			strings.ContainsFunc(k+s, unicode.IsControl) {
			continue
		}
		if len(out) == maxClaims {
			break
		}
		out[k] = s
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// dropLargestClaim removes the claim with the longest value (the greatest name among
// equals), so that trimming an identity to fit a cookie keeps the same claims every
// time; it reports false when there is none left.
func dropLargestClaim(id *middleware.Identity) bool {
	if len(id.Claims) == 0 {
		return false
	}
	var worst string
	for k, v := range id.Claims {
		if w := id.Claims[worst]; worst == "" || len(v) > len(w) || (len(v) == len(w) && k > worst) {
			worst = k
		}
	}
	id.Claims = maps.Clone(id.Claims)
	delete(id.Claims, worst)
	return true
}

// truncate cuts s to at most n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
