package deliver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseTargets(t *testing.T) {
	good := `[{"type":"email","to":["ann@example.com","bob@example.org"]},{"type":"webhook","url":"https://hooks.example.com/x"},{"type":"folder","path":"/srv/out"}]`
	ts, err := ParseTargets(json.RawMessage(good))
	if err != nil || len(ts) != 3 || ts[0].To[1] != "bob@example.org" || ts[2].Path != "/srv/out" {
		t.Fatalf("ParseTargets = %+v, %v", ts, err)
	}
	longest := `[{"type":"email","to":["` + strings.Repeat("b", 64) + `@example.org"]}]`
	if _, err := ParseTargets(json.RawMessage(longest)); err != nil {
		t.Errorf("a 64-character local part: %v", err)
	}
	for _, empty := range []string{``, `null`, `[]`} {
		if ts, err := ParseTargets(json.RawMessage(empty)); err != nil || len(ts) != 0 {
			t.Errorf("ParseTargets(%q) = %+v, %v", empty, ts, err)
		}
	}
	for in, want := range map[string]string{
		`{"type":"email"}`:                                                           "want a list",
		`[{"type":"fax","to":["1"]}]`:                                                `deliver[0]: type "fax"`,
		`[{"type":"email","to":[]}]`:                                                 "deliver[0]: an email target",
		`[{"type":"email","to":["Ann <a@x.com>"]}]`:                                  "not an email address",
		`[{"type":"email","to":["a@x.com"],"cc":["b"]}]`:                             "unknown field",
		`[{"type":"webhook","url":"ftp://x/y"}]`:                                     "http or https",
		`[{"type":"folder","path":"relative/dir"}]`:                                  "absolute, clean",
		`[{"type":"folder","path":"/srv/../etc"}]`:                                   "absolute, clean",
		`[{"type":"folder","path":"/srv","url":"https://x"}]`:                        "nothing else",
		`[{"type":"folder","path":"/srv/a\u0000b"}]`:                                 "control character",
		`[{"type":"folder","path":"/srv/a\tb"}]`:                                     "control character",
		`[{"type":"email","to":["` + strings.Repeat("a", 65) + `@example.com"]}]`:    "too long",
		`[{"type":"email","to":["a@` + strings.Repeat("b", 250) + `.example.com"]}]`: "too long",
		// Issue 36: a webhook target's URL has the form an export request's must have.
		`[{"type":"webhook","url":"https://hooks.example.com/` + strings.Repeat("a", 10<<10) + `"}]`: "at most 2048",
		`[{"type":"webhook","url":"https://hooks.example.com:99999/x"}]`:                             `bad port "99999"`,
		`[{"type":"webhook","url":"https://hooks.example.com:0/x"}]`:                                 `bad port "0"`,
		`[{"type":"webhook","url":"http://:8080/x"}]`:                                                "no host",
	} {
		if _, err := ParseTargets(json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTargets(%s) = %v, want %q", in, err, want)
		}
	}
	many := "[" + strings.Repeat(`{"type":"folder","path":"/a"},`, MaxTargets) + `{"type":"folder","path":"/a"}]`
	if _, err := ParseTargets(json.RawMessage(many)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("too many targets: %v", err)
	}
}

// TestRecipientsBound (issue 36, item 7f): a schedule's email targets together name at
// most MaxRecipients addresses (an address named twice counts twice: it is mailed
// twice); more is the list's error, which names the bound, not one target's.
func TestRecipientsBound(t *testing.T) {
	list := func(targets, each int) json.RawMessage {
		var ts []string
		for i := range targets {
			var to []string
			for j := range each {
				to = append(to, fmt.Sprintf(`"r%d.%d@example.com"`, i, j))
			}
			ts = append(ts, `{"type":"email","to":[`+strings.Join(to, ",")+`]}`)
		}
		return json.RawMessage("[" + strings.Join(ts, ",") + "]")
	}
	for _, ok := range []json.RawMessage{list(1, MaxRecipients), list(5, MaxRecipients/5),
		json.RawMessage(`[{"type":"email","to":["a@example.com"]},{"type":"folder","path":"/srv/a"},{"type":"webhook","url":"https://h.example/x"}]`)} {
		if _, err := ParseTargets(ok); err != nil {
			t.Errorf("ParseTargets(%.80s...) = %v", ok, err)
		}
	}
	twice := `{"type":"email","to":[` + strings.Repeat(`"ann@example.com",`, 30) + `"ann@example.com"]}`
	for _, over := range []json.RawMessage{list(20, 50), list(2, 26), list(MaxTargets, 3),
		json.RawMessage("[" + twice + "," + twice + "]")} {
		_, err := DecodeTargets(over)
		var te *TargetError
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", MaxRecipients)) || errors.As(err, &te) {
			t.Errorf("DecodeTargets(%.80s...) = %v, want the list refused naming the bound %d", over, err, MaxRecipients)
		}
		if _, err := ParseTargets(over); err == nil {
			t.Errorf("ParseTargets(%.80s...) accepted it", over)
		}
	}
}
