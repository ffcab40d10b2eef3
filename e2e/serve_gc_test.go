package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The server collects garbage at GOGC=400 under a soft memory limit of 64 MiB plus
// 16 MiB per export slot unless GOGC or GOMEMLIMIT says otherwise, as /metrics shows
// (internal/gcdefaults). A GOGC of the user's own sets no limit:
// the limit only bounds what the server's own GOGC lets a long export pile up.
func TestServeGCTarget(t *testing.T) {
	gogc := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\S+)$`)
	limit := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`)
	for _, c := range []struct {
		env, args       string
		percent, memlim string
	}{
		{"GOGC=", "", "400", "1.00663296e+08"},            // 96 MiB: 2 workers
		{"GOGC=", "--workers 4", "400", "1.34217728e+08"}, // 128 MiB
		{"GOMEMLIMIT=200MiB", "", "400", "2.097152e+08"},  // the user's limit
		{"GOGC=150", "", "150", "9.223372036854776e+18"},  // no limit (math.MaxInt64)
	} {
		p := startBinary(t, t.TempDir(), []string{c.env}, strings.Fields(c.args)...)
		resp, err := http.Get(p.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct {
			re   *regexp.Regexp
			want string
		}{{gogc, c.percent}, {limit, c.memlim}} {
			got := m.re.FindSubmatch(body)
			if got == nil {
				t.Fatalf("%s %s: no %s in /metrics:\n%.2000s", c.env, c.args, m.re, body)
			}
			if string(got[1]) != m.want {
				t.Errorf("%s %s: %s = %s, want %s", c.env, c.args, m.re, got[1], m.want)
			}
		}
	}
}
