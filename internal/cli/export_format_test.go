package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// export --format csv --bom asks the server for a csv file with a BOM; a format other
// than xlsx or csv, or --bom without --format csv, exits 2 with one line before any
// request. jobs show prints the format.
func TestExportFormat(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /api/v1/exports":
			b, _ := io.ReadAll(r.Body)
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, body)
			n := len(bodies)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprintf(w, `{"id":"j%d","status":"PENDING","report":"demo","params":{},"format":"xlsx"}`, n)
		case "GET /api/v1/exports/c1":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c1","status":"PENDING","report":"demo","params":{},"format":"csv","bom":true,"attempt":0,"max_attempts":3}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	for _, args := range [][]string{
		{"--format", "pdf"},
		{"--format", "CSV"},
		{"--bom"},
		{"--format", "xlsx", "--bom"},
	} {
		_, stderr, code := runCLI(t, append([]string{"export", "demo", "--server", srv.URL}, args...)...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "sheetq: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one sheetq: line", args, code, stderr)
		}
	}
	mu.Lock()
	sent := len(bodies)
	mu.Unlock()
	if sent != 0 {
		t.Fatalf("bad formats sent %d requests", sent)
	}

	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"--format", "csv", "--bom"}, map[string]any{"format": "csv", "bom": true}},
		{[]string{"--format", "csv"}, map[string]any{"format": "csv"}},
		{[]string{"--format", "xlsx"}, map[string]any{"format": "xlsx"}},
		{nil, map[string]any{}},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"export", "demo", "--server", srv.URL}, tc.args...)...)
		if code != 0 || !strings.HasPrefix(stdout, "j") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", tc.args, code, stdout, stderr)
		}
		mu.Lock()
		got := bodies[len(bodies)-1]
		mu.Unlock()
		for _, k := range []string{"format", "bom"} {
			if got[k] != tc.want[k] {
				t.Errorf("%q: sent %s = %v, want %v (body %v)", tc.args, k, got[k], tc.want[k], got)
			}
		}
	}

	stdout, stderr, code := runCLI(t, "jobs", "show", "c1", "--server", srv.URL)
	if code != 0 || !strings.Contains(stdout, "format:") || !strings.Contains(stdout, "csv (with a UTF-8 BOM)") {
		t.Fatalf("jobs show: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// export --csv-formulas keep, with --format csv, asks the real server for a csv file
// that keeps formulas, which jobs show says; neutralise (the default) is accepted with
// either format and shows nothing. A value other than neutralise or keep, or keep
// without --format csv, exits 2 with one line before any request.
func TestExportCSVFormulas(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	srv := startApp(t)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "csv", "--csv-formulas", "Keep"}, `--csv-formulas "Keep": want neutralise (the default) or keep`},
		{[]string{"--format", "csv", "--csv-formulas", "yes"}, `--csv-formulas "yes": want neutralise (the default) or keep`},
		{[]string{"--csv-formulas", "keep"}, "--csv-formulas keep needs --format csv"},
		{[]string{"--format", "xlsx", "--csv-formulas", "keep"}, "--csv-formulas keep needs --format csv"},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"export", "demo", "--server", srv}, tc.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
		oneErrLine(t, strings.Join(tc.args, " "), stderr)
	}
	if stdout, _, _ := runCLI(t, "jobs", "list", "--server", srv); stdout != "no exports\n" {
		t.Fatalf("refused commands made exports: %q", stdout)
	}

	for _, tc := range []struct {
		args   []string
		format string // what jobs show says on its format line
	}{
		{[]string{"--format", "csv", "--csv-formulas", "keep"}, "csv (formulas kept)"},
		{[]string{"--format", "csv", "--bom", "--csv-formulas", "keep"}, "csv (with a UTF-8 BOM, formulas kept)"},
		{[]string{"--format", "csv", "--csv-formulas", "neutralise"}, "csv"},
		{[]string{"--csv-formulas", "neutralise"}, "xlsx"},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"export", "demo", "-p", "rows=3", "--server", srv}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", tc.args, code, stdout, stderr)
		}
		id := strings.TrimSpace(stdout)
		stdout, stderr, code = runCLI(t, "jobs", "show", id, "--server", srv)
		line := regexp.MustCompile(`(?m)^format: +` + regexp.QuoteMeta(tc.format) + `$`)
		if code != 0 || !line.MatchString(stdout) {
			t.Errorf("%q: jobs show: exit %d, stdout %q, stderr %q; want format %q", tc.args, code, stdout, stderr, tc.format)
		}
	}
}
