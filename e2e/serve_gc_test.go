package e2e

import (
	"io"
	"net/http"
	"regexp"
	"testing"
)

// The server collects garbage at GOGC=400 unless GOGC says otherwise, as /metrics shows.
func TestServeGCTarget(t *testing.T) {
	gogc := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)$`)
	for _, c := range []struct{ env, want string }{
		{"GOGC=", "400"},
		{"GOGC=150", "150"},
	} {
		p := startBinary(t, t.TempDir(), []string{c.env})
		resp, err := http.Get(p.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := gogc.FindSubmatch(body)
		if m == nil {
			t.Fatalf("%s: no go_gc_gogc_percent in /metrics:\n%.2000s", c.env, body)
		}
		if string(m[1]) != c.want {
			t.Errorf("%s: go_gc_gogc_percent = %s, want %s", c.env, m[1], c.want)
		}
	}
}
