package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuditKeep: --audit-keep is 400 days by default, and is read from the flag, then
// SHEETQ_AUDIT_KEEP, then the config file's [serve] audit_keep; a negative value is
// refused naming where it came from.
func TestAuditKeep(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
		env   string
		file  string
		want  time.Duration
		err   string
	}{
		{"default", nil, "", "", 9600 * time.Hour, ""},
		{"file", nil, "", "audit_keep = \"720h\"", 720 * time.Hour, ""},
		{"environment beats file", nil, "48h", "audit_keep = \"720h\"", 48 * time.Hour, ""},
		{"flag beats environment", []string{"--audit-keep", "1h"}, "48h", "", time.Hour, ""},
		{"zero keeps everything", []string{"--audit-keep", "0"}, "", "", 0, ""},
		{"negative flag", []string{"--audit-keep", "-1h"}, "", "", 0, "--audit-keep cannot be negative"},
		{"negative in the file", nil, "", "audit_keep = \"-1h\"", 0, "[serve] audit_keep cannot be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			if tt.file != "" {
				if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte("[serve]\n"+tt.file+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("SHEETQ_AUDIT_KEEP", tt.env)
			if tt.env == "" {
				os.Unsetenv("SHEETQ_AUDIT_KEEP")
			}
			sv, err := serveSettings("test", append([]string{"--data", data, "--addr", "127.0.0.1:0"}, tt.flags...), io.Discard, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sv.settings.AuditKeep(); got != tt.want {
				t.Errorf("audit keep = %s, want %s", got, tt.want)
			}
		})
	}
}
