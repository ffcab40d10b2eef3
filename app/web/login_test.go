package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/internal/apptest"
)

// The token form's sign-ins, right and wrong, go to the sign-in hook (the audit log)
// with the token's name and never its secret; a sign-in the hook cannot record is
// refused with a 503 page and no session.
func TestTokenSignInIsRecorded(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token-0123"
	var mu sync.Mutex
	var events []middleware.SignInEvent
	var fail error
	ts := newTestServer(t, testOpts{Token: secret, Idle: true, OnSignIn: func(_ context.Context, ev middleware.SignInEvent) error {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
		return fail
	}})
	ts.HC.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if res := ts.PostForm("/login", url.Values{"token": {"wrong-token-0123456"}, "next": {"/"}}, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", res.StatusCode)
	}
	if res := ts.PostForm("/login", url.Values{"token": {secret}, "next": {"/"}}, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("right token: %d %s", res.StatusCode, res.Body)
	}
	mu.Lock()
	got := append([]middleware.SignInEvent(nil), events...)
	fail = errors.New("audit log unavailable")
	mu.Unlock()
	if len(got) != 2 || got[0].OK || got[0].Actor != "" || got[0].IP == "" ||
		!got[1].OK || got[1].Actor != middleware.DefaultTokenName || got[1].Detail != "token" ||
		got[1].Who.Kind != access.Token || !got[1].Who.IsAdmin() {
		t.Errorf("recorded %+v", got)
	}
	for _, ev := range got {
		if strings.Contains(ev.Actor+ev.Detail, "token-0123") {
			t.Errorf("a secret recorded: %+v", ev)
		}
	}
	res := ts.PostForm("/login", url.Values{"token": {secret}, "next": {"/"}}, nil)
	doc := apptest.Page(t, res, http.StatusServiceUnavailable)
	if !strings.Contains(doc.Find("main").Text(), "could not be") {
		t.Errorf("refused sign-in page: %s", doc.Find("main").Text())
	}
	for _, c := range res.Cookies() {
		if c.Name == middleware.SessionCookie && c.Value != "" {
			t.Errorf("a session was set: %+v", c)
		}
	}
}
