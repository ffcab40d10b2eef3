package web

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sheetq/app/middleware"
	"sheetq/ui"
)

// safeNext keeps a post-sign-in redirect on this server (middleware.SafeNext, which the
// OpenID Connect sign-in shares).
func safeNext(next string) string { return middleware.SafeNext(next) }

// loginPage shows the sign-in form: the token form when tokens are set, and the button of
// the OpenID provider when [oidc] is; without either there is nothing to sign in to.
func (p *Pages) loginPage(w http.ResponseWriter, r *http.Request) error {
	next := safeNext(r.URL.Query().Get("next"))
	if !p.cfg.Middleware.Auth().Enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	p.renderLogin(w, r, http.StatusOK, ui.LoginForm{Next: next})
	return nil
}

// login checks the token from the form and, if it is one of the server's, sets the
// session cookie and goes on to the page the user wanted.
func (p *Pages) login(w http.ResponseWriter, r *http.Request) error {
	mw := p.cfg.Middleware
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		if middleware.BodyTimedOut(err) {
			w.Header().Set("Connection", "close")
			p.renderLogin(w, r, http.StatusRequestTimeout, ui.LoginForm{Next: "/", Error: "The form took too long to arrive; try again."})
			return nil
		}
		p.renderLogin(w, r, http.StatusBadRequest, ui.LoginForm{Next: "/", Error: "The form could not be read; try again."})
		return nil
	}
	next := safeNext(r.PostForm.Get("next"))
	if !mw.Auth().Enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	ip := middleware.Client(r.Context()).IP
	if wait, locked := mw.Auth().Locked(ip); locked {
		// Refused before the token is looked at, as for the API (middleware authenticate).
		w.Header().Set("Retry-After", strconv.Itoa(middleware.RetryAfterSeconds(wait)))
		p.renderLogin(w, r, http.StatusTooManyRequests, ui.LoginForm{Next: next,
			Error: "Too many wrong tokens were tried from your address. Try again in " + waitWords(wait) + "."})
		return nil
	}
	name, ok := mw.Auth().Match(strings.TrimSpace(r.PostForm.Get("token")))
	if !ok {
		p.cfg.Log.WarnContext(r.Context(), "sign-in with a wrong token", "client_ip", ip)
		mw.SignInFailed(r)
		if err := mw.RecordSignIn(r, middleware.SignInEvent{Detail: "wrong token"}); err != nil {
			return signInNotRecorded()
		}
		p.renderLogin(w, r, http.StatusUnauthorized, ui.LoginForm{Next: next, Error: "That token is not valid for this server."})
		return nil
	}
	value, expires, err := mw.Auth().NewSession(name)
	if err != nil {
		return err
	}
	who, _ := mw.Auth().TokenWho(name)
	if err := mw.RecordSignIn(r, middleware.SignInEvent{Actor: name, OK: true, Detail: "token", Who: who}); err != nil {
		return signInNotRecorded()
	}
	mw.SetSession(w, r, value, expires)
	p.cfg.Log.InfoContext(r.Context(), "signed in", "token", name, "client_ip", ip)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// signInNotRecorded is the page of a sign-in that OnSignIn could not record (the audit
// log): it is refused rather than done without a record.
func signInNotRecorded() error {
	return &pageError{status: http.StatusServiceUnavailable, title: "Could not record the sign-in",
		message: "Sign-ins are recorded, and this one could not be (the server's log says why), so it was refused. " +
			"Try again in a minute; if it keeps failing, tell whoever runs this server.",
		back: ui.Link{Href: "/login", Text: "Sign in"}}
}

// waitWords says a wait for people: "5 minutes", "1 minute", "40 seconds".
func waitWords(d time.Duration) string {
	if m := int(math.Ceil(d.Minutes())); m > 1 {
		return strconv.Itoa(m) + " minutes"
	} else if d > 45*time.Second {
		return "1 minute"
	}
	secs := middleware.RetryAfterSeconds(d)
	if secs == 1 {
		return "1 second"
	}
	return strconv.Itoa(secs) + " seconds"
}

// logout clears the session cookie and ends every session of its token, in any browser:
// a copy of the cookie is refused from now on, after a restart too (issue 36).
func (p *Pages) logout(w http.ResponseWriter, r *http.Request) error {
	mw := p.cfg.Middleware
	mw.ClearSession(w, r)
	if c, err := r.Cookie(middleware.SessionCookie); err == nil {
		ip := middleware.Client(r.Context()).IP
		name, err := mw.Auth().SignOut(c.Value)
		if err != nil {
			// The sessions have ended in this process; only a restart would revive them.
			p.cfg.Log.ErrorContext(r.Context(), "sign-out not saved", "token", name, "client_ip", ip, "err", err)
			return &pageError{status: http.StatusInternalServerError, title: "Sign-out not saved",
				message: "This browser is signed out, and so is every other browser signed in with the same token or account, " +
					"but the server could not save that (its log says why): after a restart they would be signed in again. " +
					"Sign in and out again once the problem is fixed.",
				back: ui.Link{Href: "/login", Text: "Sign in"}}
		}
		if name != "" {
			p.cfg.Log.InfoContext(r.Context(), "signed out", "actor", name, "client_ip", ip)
		}
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// renderLogin shows the sign-in page with status: the token form when the server has
// tokens, the provider's button when it has [oidc].
func (p *Pages) renderLogin(w http.ResponseWriter, r *http.Request, status int, f ui.LoginForm) {
	auth := p.cfg.Middleware.Auth()
	f.Tokens = auth.HasTokens()
	if label := auth.ProviderLabel(); label != "" {
		f.Provider = label
		f.ProviderURL = "/auth/login?next=" + url.QueryEscape(f.Next)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// No data directory on a page anyone can see: it names paths on the server.
	if err := ui.Login(ui.Meta{Version: p.cfg.Version}, f).Render(r.Context(), w); err != nil {
		p.cfg.Log.ErrorContext(r.Context(), "render login", "err", err)
	}
}
