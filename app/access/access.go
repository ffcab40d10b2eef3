// Package access is who a request acts as and what that one may do: the roles (admin,
// member), groups and attributes of a token or a signed-in person, which reports a
// person may run (a report file's "-- access:" line), and whose exports and schedules a
// person may see (ARCHITECTURE.md, "People and permissions"). It imports nothing of the
// app, so that the middleware, the handlers and the schedules share one copy of each
// rule.
package access

import (
	"context"
	"slices"
	"strings"
)

// Role is what a person may do beyond their own things.
type Role string

// The roles. An admin sees and does everything; a member runs the reports their groups
// may run and sees only their own exports and schedules.
const (
	Admin  Role = "admin"
	Member Role = "member"
)

// ParseRole reads a role from configuration; "" is admin, so that configurations from
// before roles keep working.
func ParseRole(s string) (Role, bool) {
	switch Role(strings.ToLower(strings.TrimSpace(s))) {
	case "", Admin:
		return Admin, true
	case Member:
		return Member, true
	}
	return "", false
}

// Kind is how a request proved who it is.
type Kind string

// The kinds of identity.
const (
	// Token is a script's bearer token, or a browser signed in with one.
	Token Kind = "token"
	// Person is someone signed in with OpenID Connect.
	Person Kind = "person"
	// Local is the one user of a loopback server with no tokens and no OpenID provider:
	// an admin, as before people existed.
	Local Kind = "local"
)

// Who is the identity a request acts as.
type Who struct {
	// Name is what exports and schedules record as their owner (created_by), what the
	// audit log shows as the actor and what logs print: a token's name, or a person's
	// email. Never a secret. Token names cannot hold '@', so the two never collide.
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Display is a person's name, for the pages ("" for a token).
	Display string `json:"display,omitempty"`
	Role    Role   `json:"role"`
	// Groups are the groups this one belongs to, sorted, each once.
	Groups []string `json:"groups,omitempty"`
	// Attrs are attributes from the configuration ([[tokens]] or [[people]] attrs), which
	// win over Claims.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Claims are a person's string-valued claims from the provider's ID token and
	// userinfo.
	Claims map[string]string `json:"claims,omitempty"`
}

// IsAdmin reports whether w sees and does everything.
func (w Who) IsAdmin() bool { return w.Role == Admin }

// InGroup reports whether w belongs to group g (case-insensitive).
func (w Who) InGroup(g string) bool {
	return slices.ContainsFunc(w.Groups, func(h string) bool { return strings.EqualFold(h, g) })
}

// Attr is the value of w's attribute name: the configured attribute, or else the claim
// of that name.
func (w Who) Attr(name string) (string, bool) {
	if v, ok := w.Attrs[name]; ok {
		return v, true
	}
	v, ok := w.Claims[name]
	return v, ok
}

// Owns reports whether w may see, download, cancel and delete a thing whose owner is
// named owner: an admin may, anyone else only their own.
func (w Who) Owns(owner string) bool { return w.IsAdmin() || (owner != "" && owner == w.Name) }

// LocalUser is the one user of a loopback server without tokens or an OpenID provider.
var LocalUser = Who{Kind: Local, Role: Admin}

type ctxKey struct{}

// With returns ctx carrying who.
func With(ctx context.Context, who Who) context.Context {
	return context.WithValue(ctx, ctxKey{}, who)
}

// From is who ctx's request acts as; a context without one (a background task, a tool)
// acts as the local admin, as before people existed.
func From(ctx context.Context) Who {
	if w, ok := ctx.Value(ctxKey{}).(Who); ok {
		return w
	}
	return LocalUser
}

// Policy is what the configuration says of reports without an "-- access:" line.
type Policy struct {
	// AdminsOnly closes a report without an access line to admins ([access] default =
	// "admins"); otherwise it is open to everyone signed in.
	AdminsOnly bool
}

// CanRun reports whether w may see and run a report whose access line names groups (nil:
// the report has none).
func (p Policy) CanRun(w Who, groups []string) bool {
	if w.IsAdmin() {
		return true
	}
	if len(groups) == 0 {
		return !p.AdminsOnly
	}
	return slices.ContainsFunc(groups, w.InGroup)
}

// NormalizeGroups trims, drops blanks and duplicates (case-insensitive) and sorts.
func NormalizeGroups(gs []string) []string {
	var out []string
	for _, g := range gs {
		g = strings.TrimSpace(g)
		if g == "" || slices.ContainsFunc(out, func(h string) bool { return strings.EqualFold(h, g) }) {
			continue
		}
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}
