package app

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sheetq/ui"
)

// urlQueryEscape escapes a value for a query string.
func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext keeps a post-sign-in redirect on this server: a path, not a URL or a
// protocol-relative //host that would send the user elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	return next
}

// loginPage shows the sign-in form; without tokens there is nothing to sign in to.
func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if !s.auth.enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, ui.LoginForm{Next: next})
}

// login checks the token from the form and, if it is one of the server's, sets the
// session cookie and goes on to the page the user wanted.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		if bodyTimedOut(err) {
			w.Header().Set("Connection", "close")
			s.renderLogin(w, r, http.StatusRequestTimeout, ui.LoginForm{Next: "/", Error: "The form took too long to arrive; try again."})
			return
		}
		s.renderLogin(w, r, http.StatusBadRequest, ui.LoginForm{Next: "/", Error: "The form could not be read; try again."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !s.auth.enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if wait, locked := s.auth.limits.locked(client(r.Context()).IP); locked {
		// Refused before the token is looked at, as for the API (authenticate).
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		s.renderLogin(w, r, http.StatusTooManyRequests, ui.LoginForm{Next: next,
			Error: "Too many wrong tokens were tried from your address. Try again in " + waitWords(wait) + "."})
		return
	}
	name, ok := s.auth.match(strings.TrimSpace(r.PostForm.Get("token")))
	if !ok {
		s.log.WarnContext(r.Context(), "sign-in with a wrong token", "client_ip", client(r.Context()).IP)
		s.signInFailed(r)
		s.renderLogin(w, r, http.StatusUnauthorized, ui.LoginForm{Next: next, Error: "That token is not valid for this server."})
		return
	}
	value, expires, err := s.auth.newSession(name)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, Secure: s.isHTTPS(r), SameSite: http.SameSiteLaxMode,
	})
	s.log.InfoContext(r.Context(), "signed in", "token", name, "client_ip", client(r.Context()).IP)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// waitWords says a wait for people: "5 minutes", "1 minute", "40 seconds".
func waitWords(d time.Duration) string {
	if m := int(math.Ceil(d.Minutes())); m > 1 {
		return strconv.Itoa(m) + " minutes"
	} else if d > 45*time.Second {
		return "1 minute"
	}
	secs := retryAfterSeconds(d)
	if secs == 1 {
		return "1 second"
	}
	return strconv.Itoa(secs) + " seconds"
}

// logout clears the session cookie.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.isHTTPS(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *server) renderLogin(w http.ResponseWriter, r *http.Request, status int, f ui.LoginForm) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// No data directory on a page anyone can see: it names paths on the server.
	if err := ui.Login(ui.Meta{Version: s.cfg.Version}, f).Render(r.Context(), w); err != nil {
		s.log.ErrorContext(r.Context(), "render login", "err", err)
	}
}

// sameOrigin refuses cross-site form posts (a page elsewhere posting a token of its
// choosing would sign the browser in as someone else).
func (s *server) sameOrigin(h http.HandlerFunc) http.Handler {
	return s.crossOrigin.Handler(h)
}
