//go:build !windows

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"sheetq/internal/oidctest"
)

// TestBrowserSignInWithProvider (issue 39): a member signs in through a real OpenID
// provider (zitadel/oidc's example server, .ci/oidc) in Chromium, sees only the reports
// of their group, runs one and downloads its file; an admin then signs in with a token
// and finds both actions, by that member, on the Audit page.
func TestBrowserSignInWithProvider(t *testing.T) {
	// The provider registers exact redirect URLs: the server's port is chosen first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	mia := oidctest.User{Username: "mia", Password: "mia-password-1", FirstName: "Mia", LastName: "Moss", Email: "mia@example.com"}
	provider := oidctest.Start(t, "http://"+addr+"/auth/callback", mia)

	data := t.TempDir()
	reports := filepath.Join(data, "reports")
	if err := os.MkdirAll(reports, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"sales_rows.sql": "-- title: Sales rows\n-- source: demo\n-- access: sales\n-- param: rows int \"Rows\" = 50\nSELECT :rows;\n",
		"hr_rows.sql":    "-- title: HR rows\n-- source: demo\n-- access: hr\n-- param: rows int \"Rows\" = 50\nSELECT :rows;\n",
	} {
		if err := os.WriteFile(filepath.Join(reports, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const adminToken = "admin-token-0123456789abcdef"
	config := fmt.Sprintf(`[oidc]
issuer = %q
client_id = %q
client_secret = %q
button_label = "Example SSO"

[[people]]
email = "mia@example.com"
groups = ["sales"]

[access]
default = "admins"

[[tokens]]
name = "ops"
token = %q
`, provider.Issuer(), oidctest.ClientID, oidctest.ClientSecret, adminToken)
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, data, nil, "--addr", addr, "--reports", reports)
	b := newTab(t, p.url)

	// The member signs in at the provider.
	b.open("/")
	b.waitVisible(tid("login-oidc"), stepTimeout)
	b.click(tid("login-oidc"))
	b.waitFor("the provider's login form", stepTimeout, `!!document.querySelector("input[name=username]")`, nil)
	b.do("sign in at the provider", stepTimeout,
		chromedp.SetValue(chromedp.CSS(`input[name=username]`), mia.Username),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), mia.Password),
		chromedp.Submit(chromedp.CSS(`input[name=password]`)))
	b.waitVisible(tid("signed-in"), stepTimeout)
	if got := b.text(tid("signed-in")); !strings.Contains(got, "mia@example.com") {
		t.Errorf("signed in as %q, want mia@example.com", got)
	}
	if b.count(tid("nav-queue")) != 0 || b.count(tid("nav-audit")) != 0 {
		t.Error("a member's header links the Queue or Audit page")
	}

	// Only the reports of the member's group.
	b.open("/reports")
	b.waitVisible(tid("report"), stepTimeout)
	ids := mustEval[[]string](b, `[...document.querySelectorAll('[data-testid="report"]')].map(e => e.dataset.id)`)
	if len(ids) != 1 || ids[0] != "sales_rows" {
		t.Fatalf("the member's reports: %q, want only sales_rows", ids)
	}
	if b.count(tid("report-sql")) != 0 {
		t.Error("the Reports page shows a member the SQL")
	}

	// Runs it and downloads the file.
	b.open("/exports/new?report=sales_rows")
	b.waitVisible(tid("export-form"), stepTimeout)
	b.click(tid("submit-export"))
	b.waitFor("the job page", stepTimeout, `location.pathname.startsWith("/exports/") && !!document.querySelector(`+js(tid("job-status"))+`)`, nil)
	id, err := jobIDFromURL(mustEval[string](b, `location.pathname`))
	if err != nil {
		b.fatalf("after submitting: %v", err)
	}
	b.waitFor("SUCCEEDED", jobTimeout, statusIs("SUCCEEDED"), nil)
	file, name := b.download(tid("download-button"))
	if len(file) < 100 || !strings.HasPrefix(string(file), "PK") || !strings.HasSuffix(name, ".xlsx") {
		t.Fatalf("the download: %d bytes named %q, want an xlsx file", len(file), name)
	}

	// Signs out; the admin signs in with a token and reads the audit log.
	b.click(tid("sign-out"))
	b.waitVisible(tid("login-form"), stepTimeout)
	b.do("sign in with the admin token", stepTimeout,
		chromedp.SetValue(chromedp.CSS(tid("login-token")), adminToken),
		chromedp.Click(chromedp.CSS(tid("login-submit"))))
	b.waitVisible(tid("nav-audit"), stepTimeout)
	b.click(tid("nav-audit"))
	b.waitVisible(tid("audit-log"), stepTimeout)
	rows := mustEval[[]string](b, `[...document.querySelectorAll('[data-testid="audit-row"]')].map(r =>
		r.dataset.action + " " + r.querySelector('[data-testid="audit-who"]').textContent.trim() + " " + r.querySelector('[data-testid="audit-job-cell"]').textContent.trim())`)
	for _, want := range []string{"export_requested mia@example.com " + id, "file_downloaded mia@example.com " + id, "signin mia@example.com"} {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("the Audit page has no %q; rows:\n%s", want, strings.Join(rows, "\n"))
		}
	}
}
