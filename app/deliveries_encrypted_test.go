package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs/deliver"
)

// TestDeliverEncrypted: a schedule's email and folder targets with a password get the
// file encrypted with it (through a real SMTP server): decrypted, it is the export's
// file; the mail says it is encrypted and carries neither the password nor its place.
func TestDeliverEncrypted(t *testing.T) {
	mp := needMailpit(t)
	t.Setenv("SHEETQ_TEST_SMTP_PASSWORD", "s3cret")
	const password = "correct horse battery staple"
	t.Setenv("SHEETQ_PASSWORD_PAYROLL", password)
	root := t.TempDir()
	pwDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pwDir, "finance"), []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := FileConfig{SMTP: mp.smtp(), Deliveries: DeliveriesConfig{Folders: []string{root}, PasswordFolders: []string{pwDir}}}
	ts := newDeliveryServer(t, fc, testOpts{}, nil)
	to := uniqueAddress(t)
	id := ts.scheduledExport(50,
		deliver.Target{Type: deliver.TypeEmail, To: []string{to}, Password: "env:SHEETQ_PASSWORD_PAYROLL"},
		deliver.Target{Type: deliver.TypeFolder, Path: root, Password: "file:" + filepath.Join(pwDir, "finance")})
	got := ts.deliveryEvents(id, 2)
	for _, a := range got {
		if !a.Delivered {
			t.Fatalf("delivery attempts %+v, want both delivered", got)
		}
	}
	plain := ts.Get("/api/v1/exports/" + id + "/file")
	job, _ := ts.Job(id)

	m := mp.mailTo(t, to)
	if len(m.Attachments) != 1 {
		t.Fatalf("attachments %+v, want one", m.Attachments)
	}
	attached := mp.get(t, "/api/v1/message/"+m.ID+"/part/"+m.Attachments[0].PartID)
	if dec, err := excelize.Decrypt(attached, &excelize.Options{Password: password}); err != nil || !bytes.Equal(dec, plain.Body) {
		t.Fatalf("the attachment decrypted: %d bytes, %v; want the export's %d", len(dec), err, len(plain.Body))
	}
	raw := string(mp.get(t, "/api/v1/message/"+m.ID+"/raw"))
	for _, secret := range []string{password, "SHEETQ_PASSWORD_PAYROLL", "correct horse"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the mail carries %q", secret)
		}
	}
	if !strings.Contains(m.Text, "encrypted with a password") {
		t.Errorf("the mail's text does not say the file is encrypted: %q", m.Text)
	}

	copied, err := os.ReadFile(filepath.Join(root, job.File.Name))
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := excelize.Decrypt(copied, &excelize.Options{Password: "from a file"}); err != nil || !bytes.Equal(dec, plain.Body) {
		t.Fatalf("the folder's copy decrypted: %d bytes, %v; want the export's %d", len(dec), err, len(plain.Body))
	}
}
