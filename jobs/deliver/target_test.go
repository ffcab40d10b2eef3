package deliver

import (
	"encoding/json"
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
