package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"sheetq/internal/apptest"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// notesReport has a text parameter, where issue 36's NUL came in.
const notesReport = "-- title: Notes\n-- source: demo\n-- param: note text \"Note\"\n-- param: rows int \"Rows\" = 1\nSELECT :note, :rows;\n"

// Issue 36: a NUL character (U+0000) is refused with a 422 wherever a value comes in, on
// SQLite and on PostgreSQL alike: an export's parameter (JSON's \u0000, whatever the
// parameter's type) and its webhook URL, a schedule's parameter, and the forms. Nothing is
// stored. On PostgreSQL such a job could never end, and stopped every node's start.
func TestNULIsRefusedWhereValuesComeIn(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			opts := testOpts{Idle: true, Webhooks: webhook.Config{Secret: testWebhookSecret}}
			if backend == "postgres" {
				opts.Store = pgtest.FreshSchema(t)
			}
			ts := newTestServer(t, opts)
			apptest.WriteReport(t, ts.dir, "notes.sql", notesReport)
			ts.WaitReport("notes")

			for _, body := range []string{
				`{"report":"notes","params":{"note":"a\u0000b"}}`,
				`{"report":"notes","params":{"note":"\u0000"}}`,
				`{"report":"notes","params":{"note":"ok","rows":"1\u0000"}}`,
			} {
				p := apptest.CheckProblem(t, ts.Post(body, ""), http.StatusUnprocessableEntity, "invalid_param")
				if d, _ := p["detail"].(string); p["param"] == nil || !strings.Contains(d, "contains a NUL character") {
					t.Errorf("%s: problem %v", body, p)
				}
			}
			apptest.CheckProblem(t, ts.Post(`{"report":"notes","params":{"note":"ok"},"webhook":{"url":"https://example.com/\u0000"}}`, ""),
				http.StatusUnprocessableEntity, "invalid_webhook")

			res := ts.Request(http.MethodPost, "/api/v1/schedules",
				strings.NewReader(`{"report":"notes","params":{"note":"a\u0000b"},"cron":"0 6 * * *","timezone":"UTC"}`),
				http.Header{"Content-Type": {"application/json"}})
			if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body), "NUL") {
				t.Errorf("schedule with a NUL parameter: %d %s", res.StatusCode, res.Body)
			}

			key := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=notes"), http.StatusOK)).Get("idempotency_key")
			doc := apptest.Page(t, ts.PostForm("/exports", url.Values{"report": {"notes"}, "idempotency_key": {key}, "note": {"a\x00b"}}, nil),
				http.StatusUnprocessableEntity)
			if msg := apptest.TID(doc, "error-note").Text(); !strings.Contains(msg, "NUL") {
				t.Errorf("export form: error-note %q", msg)
			}
			sched := url.Values{"report": {"notes"}, "param.note": {"a\x00b"}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}, "action": {"save"}}
			if res := ts.PostForm("/schedules", sched, nil); res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body), "NUL") {
				t.Errorf("schedule form: %d", res.StatusCode)
			}

			if n := ts.jobCount(); n != 0 {
				t.Errorf("%d jobs stored", n)
			}
			if list, err := ts.sched.List(t.Context()); err != nil || len(list) != 0 {
				t.Errorf("schedules %d (%v)", len(list), err)
			}
		})
	}
}

// A [[schedules]] entry of the config file whose parameter holds a NUL (TOML's "\u0000")
// refuses the start, naming the schedule, the parameter and the character.
func TestConfigScheduleWithNULRefusesTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sheetq.toml")
	if err := os.WriteFile(path, []byte(`
[[schedules]]
id = "nightly-notes"
report = "notes"
cron = "0 6 * * *"
timezone = "UTC"
params = { note = "a\u0000b" }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFileConfig(path, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, testOpts{Idle: true})
	cfg.File = &fc
	if err := os.MkdirAll(cfg.ReportsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.ReportsDir, "notes.sql"), []byte(notesReport), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	err = a.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"nightly-notes"`) || !strings.Contains(err.Error(), "note") ||
		!strings.Contains(err.Error(), "NUL") {
		t.Fatalf("start with a NUL in a declared schedule: %v", err)
	}
}

// insertOldJob stores an export as a version before issue 36 did on PostgreSQL, its args
// holding a NUL, with raw SQL (the store now refuses it), due in runIn (an interval);
// PROCESSING ones are an hour stale, of a node that is gone.
func insertOldJob(t *testing.T, conn *pgx.Conn, status, runIn string, attempt, maxAttempts int) string {
	t.Helper()
	id := store.NewID()
	if _, err := conn.Exec(context.Background(), `INSERT INTO jobs (id, kind, args, status, run_at, attempt, max_attempts,
		created_at, worker, started_at, heartbeat_at)
		VALUES ($1, 'export', '{"report":"notes","params":{"note":"a\u0000b","rows":1}}', $2, now() + $5::interval, $3, $4, now(),
			CASE WHEN $2 = 'PROCESSING' THEN 'gone' END,
			CASE WHEN $2 = 'PROCESSING' THEN now() - interval '1 hour' END,
			CASE WHEN $2 = 'PROCESSING' THEN now() - interval '1 hour' END)`, id, status, attempt, maxAttempts, runIn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `INSERT INTO job_events (job_id, at, type, status, attempt)
		VALUES ($1, now(), 'accepted', 'PENDING', 0)`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A PostgreSQL store that an earlier version left with such jobs (one waiting, one whose
// node died on its last attempt, which the start-up sweep recovers) is repaired at the
// next start (migration 0011): the node starts, and the jobs are read, listed by report
// and acted on without a 500. A job that such a version stores later (a node not yet
// upgraded) answers a cancel with a 422, not a 500.
func TestNodeStartsOnJobsAnEarlierVersionStoredWithNUL(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	ctx := context.Background()
	st, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waiting := insertOldJob(t, conn, "PENDING", "0 s", 0, 3)
	dead := insertOldJob(t, conn, "PROCESSING", "0 s", 3, 3)
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = 11`); err != nil {
		t.Fatal(err)
	}

	ts := newTestServer(t, testOpts{Store: dsn}) // fails the test if the start fails
	for _, id := range []string{waiting, dead} {
		j, _ := ts.Job(id)
		if j.Status != string(store.StatusFailed) || j.Error == nil || !strings.Contains(j.Error.Message, "NUL") {
			t.Errorf("job %s = %s, %+v; want FAILED, saying why", id, j.Status, j.Error)
		}
		apptest.CheckProblem(t, ts.Request(http.MethodPost, "/api/v1/exports/"+id+"/cancel", nil, nil), http.StatusConflict, "")
	}
	res := ts.Get("/api/v1/exports?report=notes")
	var list struct {
		Exports []json.RawMessage `json:"exports"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(res.Body, &list) != nil || len(list.Exports) != 2 {
		t.Errorf("list by report: %d %s", res.StatusCode, res.Body)
	}

	later := insertOldJob(t, conn, "PENDING", "1 day", 0, 3) // not claimed within the test
	apptest.CheckProblem(t, ts.Request(http.MethodPost, "/api/v1/exports/"+later+"/cancel", nil, nil), http.StatusUnprocessableEntity, "unstorable_value")
	if _, res := ts.Job(later); res.StatusCode != http.StatusOK {
		t.Errorf("get: %d", res.StatusCode)
	}
}
