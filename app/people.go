package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/store"
)

// The app's side of people and permissions (issue 39; ARCHITECTURE.md, "People and
// permissions"): the audit entries of sign-ins and refusals, the people seen, and who a
// schedule's owner is now.

// signedIn records a sign-in or a failed one (middleware.Config.OnSignIn); an error
// refuses the sign-in.
func (a *App) signedIn(ctx context.Context, ev middleware.SignInEvent) error {
	action := audit.SignIn
	if !ev.OK {
		action = audit.SignInFailed
	}
	return a.audit.RecordAs(ctx, ev.Actor, action, audit.Entry{Detail: ev.Detail})
}

// personSeen keeps what a person's provider said of them at sign-in
// (middleware.Config.OnPerson): their schedules fire as that person, with the groups and
// claims of their latest sign-in, after the session that made them has ended.
func (a *App) personSeen(ctx context.Context, id middleware.Identity, who access.Who) error {
	// The provider's part only, as the session keeps it: [[people]] is applied again
	// when the owner is looked up, so that a change of the config file counts at the
	// next firing.
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return a.store.SavePerson(ctx, who.Name, b)
}

// owner is who a schedule's owner is now (schedules.Service.Owners): a token as the
// config file gives it, a person as they last signed in with the config file's
// [[people]] over it; store.ErrNotFound for a name that is neither.
func (a *App) owner(ctx context.Context, name string) (access.Who, error) {
	auth := a.mw.Auth()
	if who, ok := auth.TokenWho(name); ok {
		return who, nil
	}
	if !strings.Contains(name, "@") {
		return access.Who{}, fmt.Errorf("%w: no token is named %q", store.ErrNotFound, name)
	}
	raw, _, err := a.store.Person(ctx, name)
	if err != nil {
		return access.Who{}, err
	}
	var id middleware.Identity
	if err := json.Unmarshal(raw, &id); err != nil {
		return access.Who{}, fmt.Errorf("%w: person %q: %v", store.ErrNotFound, name, err)
	}
	return auth.PersonWho(id), nil
}
