package deliver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// A target's "password" says where the password is, never is it, and is never quoted
// back; only variables named SHEETQ_PASSWORD_* may be read, and a webhook takes none.
func TestPasswordRefs(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]string{
		"env:SHEETQ_PASSWORD_PAYROLL": "",
		"file:/run/secrets/payroll":   "",
		"hunter2":                     "never the password itself",
		"env:SHEETQ_DB_PASSWORD":      "starts with SHEETQ_PASSWORD_",
		"env:SHEETQ_PASSWORD_":        "starts with SHEETQ_PASSWORD_",
		"file:secrets/payroll":        "absolute, clean",
		"file:/run/../etc/shadow":     "absolute, clean",
	} {
		err := Target{Type: TypeEmail, To: []string{"ann@example.com"}, Password: ref}.Check()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", ref, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error quotes the password: %v", err)
		}
	}
	err := Target{Type: TypeWebhook, URL: "https://hooks.example.com/x", Password: "env:SHEETQ_PASSWORD_X"}.Check()
	if err == nil || !strings.Contains(err.Error(), "carries no file") {
		t.Errorf("a webhook with a password: %v", err)
	}
}

// A folder delivery with a password writes the file encrypted; a password not there is
// retried; a file outside [deliveries] password_folders is refused when the schedule is
// saved; an export whose report requires encryption is never delivered plain.
func TestFolderEncrypted(t *testing.T) {
	root := t.TempDir()
	h, _, a, body := folderFixture(t, root, root, 100<<10)
	pwDir := t.TempDir()
	h.cfg.PasswordFolders = []string{pwDir}

	a.Target.Password = "env:SHEETQ_PASSWORD_TEST_FOLDER"
	if c, perm := code(run(t, h, a, 1)); c != "password_unavailable" || perm {
		t.Fatalf("an unset variable: %s (permanent %v), want a retryable password_unavailable", c, perm)
	}
	if err := h.CheckTarget(a.Target); err == nil || !strings.Contains(err.Error(), "SHEETQ_PASSWORD_TEST_FOLDER is not set") {
		t.Errorf("saving with an unset variable: %v", err)
	}
	t.Setenv("SHEETQ_PASSWORD_TEST_FOLDER", "pw one")
	if err := run(t, h, a, 2); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, a.DownloadName))
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := excelize.Decrypt(got, &excelize.Options{Password: "pw one"}); err != nil || string(dec) != string(body) {
		t.Fatalf("decrypted copy: %d bytes, %v; want the export's %d", len(dec), err, len(body))
	}

	outside := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(outside, []byte("pw two"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Target.Password = "file:" + outside
	if err := h.CheckTarget(a.Target); err == nil || !strings.Contains(err.Error(), "password_folders") {
		t.Errorf("a password file outside password_folders: %v", err)
	}

	a.Target.Password = ""
	a.EncryptRequired = true
	if c, perm := code(run(t, h, a, 1)); c != "encryption_required" || !perm {
		t.Errorf("a required encryption without a password: %s (permanent %v)", c, perm)
	}

	// A file that is not the one recorded is not delivered encrypted either.
	a.Target.Password, a.EncryptRequired = "env:SHEETQ_PASSWORD_TEST_FOLDER", false
	a.Size++
	if c, _ := code(run(t, h, a, 1)); c != "file_mismatch" {
		t.Errorf("a short file: %s, want file_mismatch", c)
	}
}
