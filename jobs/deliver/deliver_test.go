package deliver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/storetest"
)

func TestCheckFolder(t *testing.T) {
	roots := []string{"/srv/reports", "/mnt/share"}
	for path, want := range map[string]string{
		"/srv/reports":            "",
		"/srv/reports/monthly":    "",
		"/mnt/share/a/b":          "",
		"/srv/reportsx":           "not under /srv/reports, /mnt/share",
		"/srv":                    "not under",
		"/etc":                    "not under",
		"/srv/reports/../../etc":  "absolute, clean",
		"srv/reports":             "absolute, clean",
		"/srv/reports/monthly/":   "absolute, clean",
		"/mnt/share/../reports/x": "absolute, clean",
	} {
		err := CheckFolder(path, roots)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckFolder(%s) = %v, want %q", path, err, want)
		}
		if want == "not under" && !errors.Is(err, ErrFolderNotAllowed) {
			t.Errorf("CheckFolder(%s) = %v, want ErrFolderNotAllowed", path, err)
		}
	}
	if err := CheckFolder("/srv/reports", nil); err == nil || !strings.Contains(err.Error(), "allows no folder") {
		t.Errorf("no roots: %v", err)
	}
}

// exportJob is a SUCCEEDED export with targets, as the store hands it to the hook.
func exportJob(t *testing.T, status store.Status, targets string) store.Job {
	t.Helper()
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	args, err := json.Marshal(export.Args{Report: "orders", Params: map[string]any{"from": "2026-11-01"},
		Spec: &export.Report{ID: "orders", Title: "Orders"}, ScheduleID: "sch_1", ScheduledFor: &at, TimeZone: "Europe/Berlin",
		Deliver: json.RawMessage(targets)})
	if err != nil {
		t.Fatal(err)
	}
	return store.Job{ID: "exp1", Kind: export.Name, Args: args, Status: status, FileName: "exp1.xlsx", FileSize: 1234,
		FileSHA256: "ab", ProgressRows: 10, FinishedAt: at.Add(time.Minute), CreatedAt: at}
}

func TestPlannerMakesOneDeliveryPerTarget(t *testing.T) {
	var hooked []string
	p := Planner{Webhook: func(j store.Job) ([]store.FollowUp, error) {
		hooked = append(hooked, j.NotifyURL)
		return []store.FollowUp{{ID: "wh", Kind: "webhook"}}, nil
	}}
	targets := `[{"type":"email","to":["ann@example.com"]},{"type":"webhook","url":"https://hooks.example.com/x"},{"type":"folder","path":"/srv/reports"}]`
	fus, err := p.FollowUps(exportJob(t, store.StatusSucceeded, targets))
	if err != nil || len(fus) != 3 {
		t.Fatalf("FollowUps = %+v, %v; want three", fus, err)
	}
	if len(hooked) != 1 || hooked[0] != "https://hooks.example.com/x" || fus[1].ID != "wh" {
		t.Errorf("webhook target: hook saw %v, follow-up %+v", hooked, fus[1])
	}
	for _, i := range []int{0, 2} {
		f := fus[i]
		if f.Kind != Name || f.Queue != Queue || f.MaxAttempts != MaxAttempts || f.ParentEvent != EventQueued {
			t.Errorf("follow-up %d: %+v", i, f)
		}
		var a Args
		if err := json.Unmarshal(f.Args, &a); err != nil {
			t.Fatal(err)
		}
		if a.ExportID != "exp1" || a.File != "exp1.xlsx" || a.Size != 1234 || a.Title != "Orders" || a.ScheduleID != "sch_1" ||
			a.ScheduledFor == nil || a.TimeZone != "Europe/Berlin" || !strings.HasPrefix(a.DownloadName, "orders-") || !strings.HasSuffix(a.DownloadName, ".xlsx") {
			t.Errorf("follow-up %d args %+v", i, a)
		}
		var q Queued
		if err := json.Unmarshal(f.ParentData, &q); err != nil || q.DeliveryJob != f.ID {
			t.Errorf("follow-up %d parent data %s", i, f.ParentData)
		}
	}
	for _, j := range []store.Job{
		exportJob(t, store.StatusFailed, targets),
		exportJob(t, store.StatusCanceled, targets),
		exportJob(t, store.StatusSucceeded, ``),
		{ID: "w", Kind: "webhook", Status: store.StatusSucceeded, Args: json.RawMessage(`{}`)},
	} {
		if fus, err := p.FollowUps(j); err != nil || len(fus) != 0 {
			t.Errorf("FollowUps(%s %s) = %+v, %v; want none", j.Kind, j.Status, fus, err)
		}
	}
}

// recorder keeps the attempts a handler records.
type recorder struct{ got []Attempt }

func (r *recorder) AppendEvent(_ context.Context, _, typ string, data json.RawMessage) error {
	var a Attempt
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	a.Delivered = typ == EventDelivered
	r.got = append(r.got, a)
	return nil
}

// folderFixture is a data directory with one published export file, a handler allowed
// to write under root, and the args of a delivery of that file to folder.
func folderFixture(t *testing.T, root, folder string, size int) (*Handler, *recorder, Args, []byte) {
	t.Helper()
	data := t.TempDir()
	exports := filepath.Join(data, "exports")
	if err := os.Mkdir(exports, 0o755); err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("sheetq!", size/7+1))[:size]
	if err := os.WriteFile(filepath.Join(exports, "exp1.xlsx"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	h, err := New(Config{Folders: []string{root}, Files: jobs.NewLocalFiles(exports), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	return h, rec, Args{ExportID: "exp1", Target: Target{Type: TypeFolder, Path: folder}, File: "exp1.xlsx", Size: int64(len(body)),
		SHA256: hex.EncodeToString(sum[:]), DownloadName: "orders-2026-12.xlsx"}, body
}

func run(t *testing.T, h *Handler, a Args, attempt int) error {
	t.Helper()
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return h.Run(context.Background(), &jobs.Run{JobID: "del1", Kind: Name, Args: raw, Attempt: attempt, MaxAttempts: MaxAttempts})
}

func code(err error) (string, bool) {
	var je *jobs.Error
	if errors.As(err, &je) {
		return je.Code, je.Permanent
	}
	return "", false
}

// TestFolderOnABadDay: a missing folder is retried and delivered once it is there; a
// full disk is retried, leaves no temporary file, and delivers once space is back; a
// symbolic link out of the allowed folders fails for good.
func TestFolderOnABadDay(t *testing.T) {
	root := t.TempDir()
	folder := filepath.Join(root, "monthly")
	h, rec, a, body := folderFixture(t, root, folder, 64<<10)

	err := run(t, h, a, 1)
	if c, perm := code(err); c != "folder_missing" || perm {
		t.Fatalf("missing folder: %v, want a retryable folder_missing", err)
	}
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(t, h, a, 2); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(folder, a.DownloadName)); err != nil || string(got) != string(body) {
		t.Fatalf("delivered file: %d bytes, %v; want the export's %d", len(got), err, len(body))
	}
	if len(rec.got) != 2 || rec.got[0].Delivered || !rec.got[0].WillRetry || !rec.got[1].Delivered || rec.got[1].Target != folder {
		t.Errorf("recorded %+v", rec.got)
	}

	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	a.Target.Path = filepath.Join(root, "escape")
	if c, perm := code(run(t, h, a, 1)); c != "folder_not_allowed" || !perm {
		t.Errorf("a link out of the root: %s (permanent %v), want a permanent folder_not_allowed", c, perm)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the link's target holds %v", entries)
	}
}

func TestFolderDiskFull(t *testing.T) {
	root := t.TempDir()
	storetest.MountTmpfs(t, root, 1<<20)
	h, _, a, body := folderFixture(t, root, root, 256<<10)
	free := storetest.FillDisk(t, root)
	err := run(t, h, a, 1)
	if c, perm := code(err); c != "folder_full" || perm {
		t.Fatalf("full disk: %v, want a retryable folder_full", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 || entries[0].Name() != "filler" {
		t.Errorf("after a failed copy the folder holds %v, want only the filler", entries)
	}
	free()
	if err := run(t, h, a, 2); err != nil {
		t.Fatalf("after space is back: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(root, a.DownloadName)); err != nil || len(got) != len(body) {
		t.Fatalf("delivered %d bytes, %v", len(got), err)
	}
}

func TestEmailNeedsARelayAndABaseURLForLinks(t *testing.T) {
	_, _, a, _ := folderFixture(t, "/", "/", 2000)
	a.Target = Target{Type: TypeEmail, To: []string{"ann@example.com"}}
	h, err := New(Config{Files: jobs.NewLocalFiles(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	if c, perm := code(run(t, h, a, 1)); c != "smtp_not_configured" || !perm {
		t.Errorf("no relay: %s, %v", c, perm)
	}
	if err := h.CheckTarget(a.Target); err == nil || !strings.Contains(err.Error(), "[smtp] host") {
		t.Errorf("CheckTarget without a relay: %v", err)
	}
	h, err = New(Config{Files: jobs.NewLocalFiles(t.TempDir()), AttachLimit: 1000,
		SMTP: SMTP{Host: "127.0.0.1", Port: 1, From: "reports@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, perm := code(run(t, h, a, 1)); c != "no_base_url" || !perm {
		t.Errorf("over the limit without a base URL: %s, %v", c, perm)
	}
	for _, bad := range []SMTP{
		{Host: "x", From: "reports@example.com", StartTLS: "always"},
		{Host: "x"},
		{Host: "x", From: "not an address"},
		{Host: "x", From: "a@example.com", CAFile: "/nonexistent.pem"},
	} {
		if _, err := New(Config{Files: jobs.NewLocalFiles(t.TempDir()), SMTP: bad}); err == nil {
			t.Errorf("New accepted [smtp] %+v", bad)
		}
	}
	if _, err := New(Config{Files: jobs.NewLocalFiles(t.TempDir()), Folders: []string{"relative"}}); err == nil {
		t.Error("New accepted a relative folder root")
	}
}

// The subject and the body say the time a firing was for at its schedule's wall time in
// its zone, named (the args carry it in UTC); args without a zone, with the offset.
func TestSubjectAndBody(t *testing.T) {
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	a := Args{ExportID: "exp1", Title: "Orders", Report: "orders", Params: map[string]any{"to": "2026-12-01", "from": "2026-11-01"},
		ScheduledFor: &at, TimeZone: "Europe/Berlin", ScheduleID: "sch_1", Rows: 42, Size: 12 << 20, DownloadName: "orders.xlsx"}
	if s := Subject(a); s != "Orders (from=2026-11-01, to=2026-12-01) for 2026-12-01 06:00 Europe/Berlin" {
		t.Errorf("Subject = %q", s)
	}
	noZone := a
	noZone.TimeZone = ""
	if s := Subject(noZone); !strings.HasSuffix(s, " for 2026-12-01 05:00 +00:00") {
		t.Errorf("Subject without a zone = %q", s)
	}
	b := Body(a, "https://r.example.com")
	for _, want := range []string{"Parameters: from=2026-11-01, to=2026-12-01", "Scheduled:  2026-12-01 06:00 Europe/Berlin", "Rows:       42", "12.0 MB",
		"https://r.example.com/api/v1/exports/exp1/file", "schedule sch_1"} {
		if !strings.Contains(b, want) {
			t.Errorf("body lacks %q:\n%s", want, b)
		}
	}
}

func TestStatuses(t *testing.T) {
	ev := func(typ string, v any) store.Event {
		data, _ := json.Marshal(v)
		return store.Event{Type: typ, Data: data}
	}
	evs := []store.Event{
		{Type: "succeeded"},
		ev(EventQueued, Queued{DeliveryJob: "d1", Type: TypeEmail, Target: "ann@example.com"}),
		ev(EventQueued, Queued{DeliveryJob: "d2", Type: TypeFolder, Target: "/srv/r"}),
		ev("webhook_queued", map[string]string{"webhook_id": "msg_1", "delivery_job": "w1"}),
		ev(EventFailed, Attempt{DeliveryJob: "d1", Type: TypeEmail, Attempt: 1, Error: "refused", WillRetry: true}),
		ev(EventDelivered, Attempt{DeliveryJob: "d2", Type: TypeFolder, Attempt: 1}),
		ev("webhook_failed", map[string]any{"webhook_id": "msg_1", "attempt": 8, "error": "gone"}),
		ev(EventFailed, Attempt{DeliveryJob: "d1", Type: TypeEmail, Attempt: 2, Error: "refused again"}),
	}
	got := Statuses(evs)
	if len(got) != 3 {
		t.Fatalf("Statuses = %+v", got)
	}
	if g := got[0]; g.Job != "d1" || !g.Failed() || g.Error != "refused again" || g.Attempt != 2 || g.Target != "ann@example.com" {
		t.Errorf("email: %+v", g)
	}
	if g := got[1]; g.State != OutcomeDelivered || g.Target != "/srv/r" {
		t.Errorf("folder: %+v", g)
	}
	if g := got[2]; g.Job != "w1" || g.Type != TypeWebhook || !g.Failed() || g.Error != "gone" {
		t.Errorf("webhook: %+v", g)
	}
}

// refusingRelay is an SMTP server on loopback (no STARTTLS) that answers RCPT TO with
// rcpt, and everything else as a relay that takes mail would.
func refusingRelay(t *testing.T, rcpt string) (host string, port int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				fmt.Fprint(c, "220 relay.test ESMTP\r\n")
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					switch cmd := strings.ToUpper(strings.Fields(line + " x")[0]); cmd {
					case "EHLO", "HELO":
						fmt.Fprint(c, "250 relay.test\r\n")
					case "RCPT":
						fmt.Fprint(c, rcpt+"\r\n")
					case "QUIT":
						fmt.Fprint(c, "221 bye\r\n")
						return
					default:
						fmt.Fprint(c, "250 ok\r\n")
					}
				}
			}()
		}
	}()
	return "127.0.0.1", l.Addr().(*net.TCPAddr).Port
}

// TestSMTPRefusals: a relay's permanent refusal (5xx) fails the delivery for good, a
// temporary one (4xx) is retried.
func TestSMTPRefusals(t *testing.T) {
	_, _, a, _ := folderFixture(t, "/", "/", 100)
	a.Target = Target{Type: TypeEmail, To: []string{"nobody@example.com"}}
	for answer, want := range map[string]struct {
		code      string
		permanent bool
	}{
		"550 5.1.1 no such user": {"smtp_refused", true},
		"451 4.3.0 try later":    {"smtp", false},
	} {
		host, port := refusingRelay(t, answer)
		h, err := New(Config{Files: jobs.NewLocalFiles(t.TempDir()), AttachLimit: 10,
			BaseURL: "https://r.example.com", SMTP: SMTP{Host: host, Port: port, From: "reports@example.com", StartTLS: StartTLSNone}})
		if err != nil {
			t.Fatal(err)
		}
		err = run(t, h, a, 1)
		if c, perm := code(err); c != want.code || perm != want.permanent || !strings.Contains(err.Error(), answer[4:]) {
			t.Errorf("relay answering %q: %v (code %s, permanent %v), want %s, permanent %v", answer, err, c, perm, want.code, want.permanent)
		}
	}
}
