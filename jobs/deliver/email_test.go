package deliver

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestSubjectIsBounded (issue 36, item 7f): a parameter of 60,000 characters makes a
// subject of at most MaxSubject characters, cut on a character boundary with an
// ellipsis; each value is cut, so that a short parameter after a long one still shows,
// and the firing's time is kept whole. A value's line break is a space.
func TestSubjectIsBounded(t *testing.T) {
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	a := Args{Title: "Orders", Params: map[string]any{"a_note": strings.Repeat("é", 60000), "from": "2026-11-01"},
		ScheduledFor: &at, TimeZone: "Europe/Berlin"}
	s := Subject(a)
	if n := utf8.RuneCountInString(s); n > MaxSubject || !utf8.ValidString(s) {
		t.Fatalf("subject of %d characters (valid UTF-8: %v), want at most %d: %.300q", n, utf8.ValidString(s), MaxSubject, s)
	}
	want := "Orders (a_note=" + strings.Repeat("é", maxSubjectValue-1) + "…, from=2026-11-01) for 2026-12-01 06:00 Europe/Berlin"
	if s != want {
		t.Errorf("Subject = %q, want %q", s, want)
	}

	// Many long values: the title and parameters are cut, the time is not.
	a.Params = map[string]any{}
	for i := range 20 {
		a.Params[fmt.Sprintf("p%02d", i)] = strings.Repeat("x", 1000) + "\r\nBcc: x@example.com"
	}
	s = Subject(a)
	if n := utf8.RuneCountInString(s); n != MaxSubject || !strings.HasSuffix(s, "… for 2026-12-01 06:00 Europe/Berlin") ||
		!strings.HasPrefix(s, "Orders (p00=xxx") {
		t.Errorf("subject of %d characters: %q", n, s)
	}
	if strings.ContainsAny(s, "\r\n") {
		t.Errorf("subject has a line break: %q", s)
	}
	a.ScheduledFor = nil
	if s := Subject(a); utf8.RuneCountInString(s) != MaxSubject || !strings.HasSuffix(s, "…") {
		t.Errorf("without a time: %q", s)
	}

	// Short ones are as they were.
	a.Params = map[string]any{"from": "2026-11-01"}
	if s := Subject(a); s != "Orders (from=2026-11-01)" {
		t.Errorf("Subject = %q", s)
	}
	if got := cut("abc", 3) + cut("abcd", 3) + cut("ab", 0); got != "abcab…" {
		t.Errorf("cut: %q", got)
	}
}

// TestMailOfALongParameter sends a delivery whose parameter has 60,000 characters
// through the SMTP server of .ci/mailpit (skipped without it, except in CI): the mail
// arrives with the bounded subject, and its body names the parameter whole.
func TestMailOfALongParameter(t *testing.T) {
	addr, api := os.Getenv("SHEETQ_TEST_SMTP_ADDR"), strings.TrimRight(os.Getenv("SHEETQ_TEST_MAILPIT_API"), "/")
	if addr == "" || api == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_SMTP_ADDR and SHEETQ_TEST_MAILPIT_API are not set: CI must run .ci/mailpit")
		}
		t.Skip("no SMTP server: run eval \"$(bash .ci/mailpit)\" to test email deliveries")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	fixture, _, a, _ := folderFixture(t, "/", "/", 2000)
	h, err := New(Config{Files: fixture.cfg.Files, Logger: slog.New(slog.DiscardHandler),
		SMTP: SMTP{Host: host, Port: p, Username: "sheetq", Password: "s3cret", From: "sheetq <reports@sheetq.test>",
			StartTLS: StartTLSMandatory, CAFile: os.Getenv("SHEETQ_TEST_SMTP_CA")}})
	if err != nil {
		t.Fatal(err)
	}
	to := fmt.Sprintf("long-subject-%d@sheetq.test", time.Now().UnixNano())
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	long := strings.Repeat("n", 60000)
	a.Target = Target{Type: TypeEmail, To: []string{to}}
	a.Title, a.Report, a.Params = "Orders", "orders", map[string]any{"note": long}
	a.ScheduledFor, a.TimeZone = &at, "Europe/Berlin"
	if err := run(t, h, a, 1); err != nil {
		t.Fatalf("send: %v", err)
	}

	getJSON := func(path string, v any) {
		t.Helper()
		res, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("Mailpit GET %s: %d", path, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatalf("Mailpit GET %s: %v", path, err)
		}
	}
	// The relay accepted the mail (run returned nil), so Mailpit has stored it; the
	// search is its index, which may lag the acceptance by a moment.
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); {
		var list struct{ Messages []struct{ ID string } }
		getJSON("/api/v1/search?query="+url.QueryEscape("to:"+to), &list)
		if len(list.Messages) > 1 {
			t.Fatalf("%d messages to %s, want one", len(list.Messages), to)
		}
		if len(list.Messages) == 1 {
			id = list.Messages[0].ID
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if id == "" {
		t.Fatalf("no message to %s in Mailpit", to)
	}
	var m struct{ Subject, Text string }
	getJSON("/api/v1/message/"+id, &m)
	want := "Orders (note=" + strings.Repeat("n", maxSubjectValue-1) + "…) for 2026-12-01 06:00 Europe/Berlin"
	if m.Subject != want {
		t.Errorf("subject %.300q, want %q", m.Subject, want)
	}
	if !strings.Contains(m.Text, "Parameters: note="+long) {
		t.Errorf("the body does not name the parameter whole (%d bytes)", len(m.Text))
	}
}
