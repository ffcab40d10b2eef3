package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/internal/apptest"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// mailpitEnv is the SMTP server of .ci/mailpit: its SMTP address, the CA file its
// STARTTLS certificate is signed with, and its HTTP API. Without it the email tests skip,
// except in CI, where they fail.
type mailpitEnv struct {
	host string
	port int
	ca   string
	api  string
}

func needMailpit(t *testing.T) mailpitEnv {
	t.Helper()
	addr, api := os.Getenv("SHEETQ_TEST_SMTP_ADDR"), os.Getenv("SHEETQ_TEST_MAILPIT_API")
	if addr == "" || api == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_SMTP_ADDR and SHEETQ_TEST_MAILPIT_API are not set: CI must run .ci/mailpit")
		}
		t.Skip("no SMTP server: run eval \"$(bash .ci/mailpit)\" to test email deliveries")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return mailpitEnv{host: host, port: n, ca: os.Getenv("SHEETQ_TEST_SMTP_CA"), api: strings.TrimRight(api, "/")}
}

// smtp is the [smtp] table that sends through mp, with STARTTLS and a login, as a real
// relay is used.
func (mp mailpitEnv) smtp() deliver.SMTP {
	return deliver.SMTP{Host: mp.host, Port: mp.port, Username: "sheetq", Password: "env:SHEETQ_TEST_SMTP_PASSWORD",
		From: "sheetq <reports@sheetq.test>", StartTLS: deliver.StartTLSMandatory, CAFile: mp.ca}
}

// mailpitMessage is the part of Mailpit's GET /api/v1/message/{ID} the tests read.
type mailpitMessage struct {
	ID          string
	MessageID   string
	Subject     string
	Text        string
	To          []struct{ Address string }
	Attachments []struct {
		PartID      string
		FileName    string
		ContentType string
		Size        int64
	}
}

// mailTo waits for the one message to addr and returns it.
func (mp mailpitEnv) mailTo(t *testing.T, addr string) mailpitMessage {
	t.Helper()
	var id string
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		var list struct {
			Messages []struct{ ID string }
		}
		mp.getJSON(t, "/api/v1/search?query="+url.QueryEscape("to:"+addr), &list)
		if len(list.Messages) > 1 {
			t.Fatalf("%d messages to %s, want one", len(list.Messages), addr)
		}
		if len(list.Messages) == 1 {
			id = list.Messages[0].ID
			return true, ""
		}
		return false, "no message to " + addr + " in Mailpit"
	})
	var m mailpitMessage
	mp.getJSON(t, "/api/v1/message/"+id, &m)
	return m
}

func (mp mailpitEnv) get(t *testing.T, path string) []byte {
	t.Helper()
	res, err := http.Get(mp.api + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("Mailpit GET %s: %d %v %s", path, res.StatusCode, err, body)
	}
	return body
}

func (mp mailpitEnv) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(mp.get(t, path), v); err != nil {
		t.Fatalf("Mailpit GET %s: %v", path, err)
	}
}

// newDeliveryServer is newTestServer with the config file's [smtp] and [deliveries]
// set to fc's; tweak, when set, may replace the delivery kind before the engine starts.
func newDeliveryServer(t *testing.T, fc FileConfig, opts testOpts, tweak func(a *App)) *testServer {
	t.Helper()
	cfg := testConfig(t, opts)
	cfg.File = &fc
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	t.Cleanup(a.Stop)
	if tweak != nil {
		tweak(a)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("start app: %v", err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(a.hub.Stop) // before hs.Close: open event streams end
	return &testServer{App: a, Client: apptest.NewClient(t, hs), t: t}
}

// scheduledExport enqueues a demo export the way a schedule's firing does: with its
// schedule's id and time and its delivery targets in the args.
func (ts *testServer) scheduledExport(rows int, targets ...deliver.Target) string {
	ts.t.Helper()
	args, prob := ts.exports.Validate(context.Background(), "demo", map[string]any{"rows": rows}, export.FileOptions{})
	if prob != nil {
		ts.t.Fatalf("validate: %+v", prob)
	}
	raw, err := json.Marshal(targets)
	if err != nil {
		ts.t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC) // as a firing stores it, with its zone apart
	args.ScheduleID, args.ScheduledFor, args.TimeZone, args.Deliver = "sch_test", &at, "Europe/Berlin", raw
	job, _, err := ts.exports.Enqueue(context.Background(), args, "", "")
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.WaitStatus(job.ID, store.StatusSucceeded)
	return job.ID
}

// deliveryEvents waits until exportID's timeline has n delivery attempts that ended
// (delivered, or failed for good) and returns every delivery attempt recorded.
func (ts *testServer) deliveryEvents(exportID string, n int) []deliver.Attempt {
	ts.t.Helper()
	var got []deliver.Attempt
	apptest.WaitFor(ts.t, 30*time.Second, func() (bool, string) {
		evs, err := ts.store.Events(context.Background(), exportID)
		if err != nil {
			ts.t.Fatal(err)
		}
		got = got[:0]
		ended := 0
		for _, e := range evs {
			if e.Type != deliver.EventDelivered && e.Type != deliver.EventFailed {
				continue
			}
			var a deliver.Attempt
			if err := json.Unmarshal(e.Data, &a); err != nil {
				ts.t.Fatal(err)
			}
			a.Delivered = e.Type == deliver.EventDelivered
			got = append(got, a)
			if a.Delivered || !a.WillRetry {
				ended++
			}
		}
		return ended >= n, fmt.Sprintf("export %s: %d of %d deliveries ended; events %v", exportID, ended, n, ts.eventTypes(exportID))
	})
	return got
}

// uniqueAddress is an address no other test (or earlier run on the same Mailpit) uses.
func uniqueAddress(t *testing.T) string {
	return fmt.Sprintf("%s-%d@example.com", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
}

// sheetRows reads every row of an xlsx file's first sheet.
func sheetRows(t *testing.T, file []byte) [][]string {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("open xlsx: %v", err)
	}
	defer f.Close()
	rows, err := f.GetRows(f.GetSheetList()[0])
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestDeliverByEmailAttachesTheFile: a scheduled export's email target gets one
// message through a real SMTP server (STARTTLS, then AUTH) with the xlsx attached, the
// same file as the download, cell by cell; the subject names the report, its parameters
// and the scheduled time.
func TestDeliverByEmailAttachesTheFile(t *testing.T) {
	mp := needMailpit(t)
	t.Setenv("SHEETQ_TEST_SMTP_PASSWORD", "s3cret")
	ts := newDeliveryServer(t, FileConfig{SMTP: mp.smtp()}, testOpts{}, nil)
	to := uniqueAddress(t)
	id := ts.scheduledExport(300, deliver.Target{Type: deliver.TypeEmail, To: []string{to}})
	got := ts.deliveryEvents(id, 1)
	if len(got) != 1 || !got[0].Delivered || got[0].Mode != "attachment" || got[0].Attempt != 1 {
		t.Fatalf("delivery attempts %+v, want one delivered attachment", got)
	}

	m := mp.mailTo(t, to)
	for _, want := range []string{"Demo", "rows=300", "2026-12-01 06:00 Europe/Berlin"} {
		if !strings.Contains(m.Subject, want) {
			t.Errorf("subject %q lacks %q", m.Subject, want)
		}
	}
	if !strings.HasPrefix(m.MessageID, got[0].DeliveryJob+".sheetq@") {
		t.Errorf("Message-ID %q, want it made of the delivery job %s (the same on every attempt)", m.MessageID, got[0].DeliveryJob)
	}
	if len(m.Attachments) != 1 {
		t.Fatalf("attachments %+v, want one", m.Attachments)
	}
	att := m.Attachments[0]
	job, _ := ts.Job(id)
	if att.FileName != job.File.Name || !strings.Contains(att.ContentType, "spreadsheetml") {
		t.Errorf("attachment %s (%s), want %s as xlsx", att.FileName, att.ContentType, job.File.Name)
	}
	attached := mp.get(t, "/api/v1/message/"+m.ID+"/part/"+att.PartID)
	if sum := sha256.Sum256(attached); hex.EncodeToString(sum[:]) != job.File.SHA256 {
		t.Errorf("attachment's sha256 differs from the export's file (%d bytes, want %d)", len(attached), job.File.Size)
	}
	download := ts.Get("/api/v1/exports/" + id + "/file")
	if download.StatusCode != http.StatusOK {
		t.Fatalf("download: %d", download.StatusCode)
	}
	want, have := sheetRows(t, download.Body), sheetRows(t, attached)
	if len(want) != 301 || len(have) != len(want) {
		t.Fatalf("attachment has %d rows, the export %d (want 301: header and 300)", len(have), len(want))
	}
	for r := range want {
		if len(have[r]) != len(want[r]) {
			t.Fatalf("row %d: %d cells, want %d", r+1, len(have[r]), len(want[r]))
		}
		for c := range want[r] {
			if have[r][c] != want[r][c] {
				t.Fatalf("row %d cell %d: %q, want %q", r+1, c+1, have[r][c], want[r][c])
			}
		}
	}
	if s := ts.scrape().series(t, "sheetq_deliveries_total", map[string]string{"type": "email", "outcome": "delivered"}); s == nil || s.GetCounter().GetValue() != 1 {
		t.Errorf("sheetq_deliveries_total{email,delivered} = %v, want 1", s)
	}
}

// TestDeliverByEmailLinksAboveTheLimit: a file over attach_limit is sent as a link to
// its download on the server's public URL; without a public URL the delivery fails at
// once, saying why.
func TestDeliverByEmailLinksAboveTheLimit(t *testing.T) {
	mp := needMailpit(t)
	t.Setenv("SHEETQ_TEST_SMTP_PASSWORD", "s3cret")
	fc := FileConfig{SMTP: mp.smtp(), Deliveries: DeliveriesConfig{AttachLimit: 1000}}
	ts := newDeliveryServer(t, fc, testOpts{BaseURL: "https://reports.example.com"}, nil)
	to := uniqueAddress(t)
	id := ts.scheduledExport(300, deliver.Target{Type: deliver.TypeEmail, To: []string{to}})
	if got := ts.deliveryEvents(id, 1); !got[0].Delivered || got[0].Mode != "link" {
		t.Fatalf("delivery attempts %+v, want one delivered link", got)
	}
	m := mp.mailTo(t, to)
	if len(m.Attachments) != 0 {
		t.Errorf("attachments %+v, want none above the limit", m.Attachments)
	}
	if link := "https://reports.example.com/api/v1/exports/" + id + "/file"; !strings.Contains(m.Text, link) {
		t.Errorf("text %q lacks the link %s", m.Text, link)
	}

	noURL := newDeliveryServer(t, fc, testOpts{}, nil)
	id = noURL.scheduledExport(300, deliver.Target{Type: deliver.TypeEmail, To: []string{uniqueAddress(t)}})
	got := noURL.deliveryEvents(id, 1)
	if len(got) != 1 || got[0].Delivered || got[0].WillRetry || got[0].Code != "no_base_url" || !strings.Contains(got[0].Error, "--base-url") {
		t.Fatalf("delivery attempts %+v, want one permanent no_base_url naming --base-url", got)
	}
}

// TestDeliverToFolder: a folder target under an allowed root gets the whole file under
// its download name, with no temporary file left; a folder outside the roots fails at
// once with a clear error.
func TestDeliverToFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target := filepath.Join(root, "monthly")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	ts := newDeliveryServer(t, FileConfig{Deliveries: DeliveriesConfig{Folders: []string{root}}}, testOpts{}, nil)
	id := ts.scheduledExport(50, deliver.Target{Type: deliver.TypeFolder, Path: target}, deliver.Target{Type: deliver.TypeFolder, Path: outside})
	got := ts.deliveryEvents(id, 2)
	if len(got) != 2 {
		t.Fatalf("delivery attempts %+v, want two", got)
	}
	for _, a := range got {
		switch a.Target {
		case target:
			if !a.Delivered {
				t.Errorf("delivery to %s: %+v, want delivered", target, a)
			}
		case outside:
			if a.Delivered || a.WillRetry || a.Code != "folder_not_allowed" || !strings.Contains(a.Error, "not under "+root) {
				t.Errorf("delivery to %s: %+v, want a permanent folder_not_allowed naming the allowed folder", outside, a)
			}
		default:
			t.Errorf("unexpected attempt %+v", a)
		}
	}
	job, _ := ts.Job(id)
	copied, err := os.ReadFile(filepath.Join(target, job.File.Name))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(copied); hex.EncodeToString(sum[:]) != job.File.SHA256 {
		t.Errorf("copied file's sha256 differs from the export's (%d bytes, want %d)", len(copied), job.File.Size)
	}
	if rows := sheetRows(t, copied); len(rows) != 51 {
		t.Errorf("copied file has %d rows, want 51", len(rows))
	}
	entries, _ := os.ReadDir(target)
	if len(entries) != 1 {
		t.Errorf("folder holds %v, want only the file", entries)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the disallowed folder holds %v", entries)
	}
}

// TestDeliveryRetriesWhenSMTPIsDown: a relay that refuses connections makes the email
// delivery retry on its schedule until its attempts are spent; each attempt is on the
// export's timeline and in sheetq_deliveries_total, and the delivery job ends FAILED.
func TestDeliveryRetriesWhenSMTPIsDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now: every connection is refused
	fc := FileConfig{SMTP: deliver.SMTP{Host: "127.0.0.1", Port: port, From: "reports@sheetq.test"}}
	ts := newDeliveryServer(t, fc, testOpts{}, func(a *App) {
		// The same kind on a schedule of milliseconds, so that all its attempts run now.
		c := a.deliveries.Config()
		c.Schedule = []time.Duration{5 * time.Millisecond}
		h, err := deliver.New(c)
		if err != nil {
			t.Fatal(err)
		}
		a.engine.Register(deliver.Name, h)
	})
	id := ts.scheduledExport(10, deliver.Target{Type: deliver.TypeEmail, To: []string{"ann@example.com"}})
	got := ts.deliveryEvents(id, 1)
	if len(got) != deliver.MaxAttempts {
		t.Fatalf("%d attempts recorded, want %d: %+v", len(got), deliver.MaxAttempts, got)
	}
	for i, a := range got {
		if a.Delivered || a.Attempt != i+1 || a.WillRetry != (i+1 < deliver.MaxAttempts) || a.Code != "smtp" || !strings.Contains(a.Error, "refused") {
			t.Errorf("attempt %d: %+v, want a failed smtp attempt (connection refused)", i+1, a)
		}
	}
	// The attempt's event is written before its job's end commits: wait for the end.
	var dj store.Job
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		dj, err = ts.store.Get(context.Background(), got[0].DeliveryJob)
		return err == nil && dj.Status.Final(), fmt.Sprintf("delivery job %s, %v", dj.Status, err)
	})
	if dj.Status != store.StatusFailed || dj.Queue != deliver.Queue {
		t.Errorf("delivery job %+v: want FAILED in the %s lane", dj, deliver.Queue)
	}
	evs, err := ts.store.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	st := deliver.Statuses(evs)
	if len(st) != 1 || !st[0].Failed() || !strings.Contains(st[0].Error, "refused") || st[0].Attempt != deliver.MaxAttempts {
		t.Errorf("Statuses = %+v, want one failed delivery", st)
	}
	fams := ts.scrape()
	for outcome, want := range map[string]float64{"retrying": deliver.MaxAttempts - 1, "failed": 1} {
		if s := fams.series(t, "sheetq_deliveries_total", map[string]string{"type": "email", "outcome": outcome}); s == nil || s.GetCounter().GetValue() != want {
			t.Errorf("sheetq_deliveries_total{email,%s} = %v, want %v", outcome, s, want)
		}
	}
}

// TestDeliverToAWebhookAndAFolderTogether: a webhook target is the signed
// export.succeeded webhook of any export, queued beside the other targets' deliveries,
// and each delivery shows in deliver.Statuses.
func TestDeliverToAWebhookAndAFolderTogether(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	rc := newHookReceiver(t, nil, func(int, http.ResponseWriter) {})
	ts := newDeliveryServer(t, FileConfig{Deliveries: DeliveriesConfig{Folders: []string{root}}},
		testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}}, nil)
	id := ts.scheduledExport(5, deliver.Target{Type: deliver.TypeWebhook, URL: rc.URL + "/hook"}, deliver.Target{Type: deliver.TypeFolder, Path: root})
	ts.deliveryEvents(id, 1)
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		got := rc.of(id)
		return len(got) == 1 && got[0].typ == "export.succeeded", fmt.Sprintf("receiver got %d deliveries", len(got))
	})
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		evs, err := ts.store.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		st := deliver.Statuses(evs)
		ok := len(st) == 2 && st[0].Type == deliver.TypeWebhook && st[1].Type == deliver.TypeFolder
		for _, s := range st {
			ok = ok && s.State == deliver.OutcomeDelivered
		}
		return ok, fmt.Sprintf("statuses %+v", st)
	})
}

// TestDeliveriesConfig: [smtp] and [deliveries] are read from the config file (the
// password from the environment), and settings that cannot work refuse the start.
func TestDeliveriesConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sheetq.toml")
	t.Setenv("SHEETQ_TEST_RELAY_PW", "pw")
	text := `[smtp]
host = "smtp.example.com"
port = 2525
username = "sheetq"
password = "env:SHEETQ_TEST_RELAY_PW"
from = "sheetq <reports@example.com>"
starttls = "opportunistic"

[deliveries]
folders = ["/srv/reports"]
attach_limit = 5000000
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFileConfig(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if fc.SMTP.Host != "smtp.example.com" || fc.SMTP.Port != 2525 || fc.SMTP.StartTLS != "opportunistic" ||
		len(fc.Deliveries.Folders) != 1 || fc.Deliveries.AttachLimit != 5000000 {
		t.Errorf("config %+v %+v", fc.SMTP, fc.Deliveries)
	}
	if s, err := fc.SMTP.Resolved(); err != nil || s.Password != "pw" {
		t.Errorf("password %q, %v", s.Password, err)
	}
	if err := os.WriteFile(path, []byte("[smtp]\nhots = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFileConfig(path, false); err == nil || !strings.Contains(err.Error(), "smtp.hots") {
		t.Errorf("a misspelt key: %v", err)
	}
	for _, bad := range []FileConfig{
		{SMTP: deliver.SMTP{Host: "x", From: "a@example.com", StartTLS: "always"}},
		{SMTP: deliver.SMTP{Host: "x", From: "a@example.com", Password: "env:SHEETQ_TEST_UNSET_PW"}},
		{Deliveries: DeliveriesConfig{Folders: []string{"reports"}}},
		{Deliveries: DeliveriesConfig{AttachLimit: -1}},
	} {
		cfg := testConfig(t, testOpts{})
		cfg.File = &bad
		if a, err := New(context.Background(), cfg); err == nil {
			a.Stop()
			t.Errorf("New accepted %+v", bad)
		}
	}
}
