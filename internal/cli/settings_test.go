package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/jobs"
)

// TestSettingsPrecedence: one setting given by a flag, its SHEETQ_* variable and the
// config file resolves to the flag's; the variable beats the file; the file beats the
// default. serve (serveSettings) and a tool command (doctor's flags, and backup end to
// end) resolve the same job store from the same inputs, by the same rules
// (app.ResolveStores); the [serve] table follows the same order for serve's own flags.
func TestSettingsPrecedence(t *testing.T) {
	const (
		flagURL = "postgres://u@flag-host/db"
		envURL  = "postgres://u@env-host/db"
		fileURL = "postgres://u@file-host/db"
	)
	for _, tt := range []struct {
		name              string
		flags             []string // --store, --workers
		envStore, envWork string   // SHEETQ_STORE, SHEETQ_WORKERS; "" unset
		file              bool     // [store] url = fileURL, [serve] workers = 7
		want              string   // the resolved DSN; "" is the data directory's SQLite file
		workers           int
	}{
		{"flag beats environment and file", []string{"--store", flagURL, "--workers", "5"}, envURL, "6", true, flagURL, 5},
		{"environment beats file", nil, envURL, "6", true, envURL, 6},
		{"file beats default", nil, "", "", true, fileURL, 7},
		{"default", nil, "", "", false, "", jobs.Defaults().Workers},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			if tt.file {
				conf := "[store]\nurl = \"" + fileURL + "\"\n\n[serve]\nworkers = 7\n"
				if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(conf), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for name, v := range map[string]string{"SHEETQ_STORE": tt.envStore, "SHEETQ_WORKERS": tt.envWork} {
				t.Setenv(name, v) // restored when the test ends
				if v == "" {
					os.Unsetenv(name)
				}
			}
			var storeFlag []string // what doctor and backup take of the flags
			if len(tt.flags) > 0 {
				storeFlag = tt.flags[:2]
			}

			sv, err := serveSettings("test", append([]string{"--data", data, "--addr", "127.0.0.1:0"}, tt.flags...), io.Discard, nil)
			if err != nil {
				t.Fatalf("serve: %v", err)
			}
			if got := sv.settings.Stores().DSN; got != tt.want {
				t.Errorf("serve's store = %q, want %q", got, tt.want)
			}
			if got := sv.settings.Engine().Workers; got != tt.workers {
				t.Errorf("serve's workers = %d, want %d", got, tt.workers)
			}

			// doctor's flags, parsed and resolved as doctorCmd does.
			fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			sf := addStoreFlags(fs, true, true)
			if err := parseWithEnv(fs, storeFlag); err != nil {
				t.Fatal(err)
			}
			st, err := sf.resolve(data)
			if err != nil {
				t.Fatalf("doctor: %v", err)
			}
			if st.DSN != tt.want {
				t.Errorf("doctor's store = %q, want %q as serve's", st.DSN, tt.want)
			}

			// backup, end to end: with a PostgreSQL store it names the store it resolved
			// and copies nothing.
			if tt.want != "" {
				args := append([]string{"backup", filepath.Join(t.TempDir(), "copy.db"), "--data", data}, storeFlag...)
				_, stderr, code := runCLI(t, args...)
				host := strings.TrimPrefix(tt.want, "postgres://u@")
				if code != 1 || !strings.Contains(stderr, "pg_dump") || !strings.Contains(stderr, host) {
					t.Errorf("backup: exit %d, %q; want 1 naming %s", code, stderr, host)
				}
			}
		})
	}
}
