//go:build !windows

package e2e

import (
	"archive/zip"
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"sheetq/internal/client"
	"sheetq/store"
)

// resumeHeartbeat is the crash tests' heartbeat: each attempt checkpoints at every one.
// A fast export gets a faster one (crashThrice's heartbeat), so that the API's progress,
// stamped at each, shows it at 25%, 50% and 90%.
const resumeHeartbeat = 250 * time.Millisecond

// crash is one SIGKILL of a long export: the rows its last heartbeat stamped, and the
// rows the attempt after it kept from the last checkpoint.
type crash struct {
	at         float64 // the fraction of the rows the kill waited for
	stamped    int64   // progress_rows in the job's row after the kill
	kept       int64   // the next attempt's resumed event
	killedAt   time.Time
	resumedAt  time.Time
	restartDur time.Duration // from the kill to the resumed event
}

// crashThrice runs body's export on a server in data, kills it with SIGKILL when the
// export has written about 25%, 50% and 90% of total rows, restarting it each time, and
// returns the finished job with what each crash cost. Each kill's next attempt must
// resume from a checkpoint at most about one heartbeat before the kill.
func crashThrice(t *testing.T, data, body string, total int64, rowsPerSecond float64, heartbeat time.Duration, env []string, args ...string) (client.Job, []crash) {
	t.Helper()
	// The default budget of 3 attempts: an attempt lost after a checkpoint is not spent
	// (rule 30), so three crashes do not fail the export.
	args = append([]string{"--heartbeat", heartbeat.String(), "--stale-after", "1s", "--workers", "1"}, args...)
	p := startBinary(t, data, env, args...)
	j := p.submit(t, body)
	var crashes []crash
	for _, f := range []float64{0.25, 0.5, 0.9} {
		want := int64(f * float64(total))
		p.waitJob(t, j.ID, fmt.Sprintf("PROCESSING past %d rows", want), func(j client.Job) bool {
			return j.Status == "PROCESSING" && j.Progress.Rows >= want
		})
		p.kill(t)
		c := crash{at: f, killedAt: time.Now()}
		row, _ := inspect(t, data, j.ID)
		if row.Status != store.StatusProcessing {
			t.Fatalf("after the kill at %.0f%%: %s", f*100, row.Status)
		}
		c.stamped = row.ProgressRows
		crashes = append(crashes, c)
		p = startBinary(t, data, env, args...)
	}
	done := p.waitJob(t, j.ID, "ended", func(j client.Job) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
	if done.Status != "SUCCEEDED" {
		t.Fatalf("export ended %s: %+v", done.Status, done.Error)
	}
	metrics := scrape(t, p.url)
	p.kill(t) // the events are read from the file
	_, evs := inspect(t, data, j.ID)
	var resumed []store.Event
	for _, e := range evs {
		if e.Type == store.EventResumed {
			resumed = append(resumed, e)
		}
	}
	if len(resumed) != len(crashes) {
		t.Fatalf("%d resumed events for %d crashes", len(resumed), len(crashes))
	}
	perBeat := int64(rowsPerSecond * heartbeat.Seconds())
	for i := range crashes {
		var d store.ResumedData
		if err := resumed[i].Decode(&d); err != nil {
			t.Fatal(err)
		}
		c := &crashes[i]
		c.kept, c.resumedAt = d.Rows, resumed[i].At
		c.restartDur = c.resumedAt.Sub(c.killedAt)
		// Each heartbeat carries the checkpoint made at it (rule 30), and a heartbeat
		// without one may stamp more rows: those since the checkpoint, at most one
		// heartbeat's, are the rows done again.
		if c.kept > c.stamped || c.kept < c.stamped-perBeat || c.kept <= 0 {
			t.Errorf("kill at %.0f%%: resumed with %d rows; the last heartbeat stamped %d (a heartbeat is about %d rows)",
				c.at*100, c.kept, c.stamped, perBeat)
		}
		t.Logf("kill at %.0f%%: last heartbeat %d rows, resumed from %d: %d rows (%.2f s) written again, %s from the kill to the resume",
			c.at*100, c.stamped, c.kept, c.stamped-c.kept, float64(c.stamped-c.kept)/rowsPerSecond, c.restartDur.Round(time.Millisecond))
	}
	// The last process resumed once, keeping the last crash's rows.
	last := crashes[len(crashes)-1].kept
	if metric(metrics, `sheetq_resumes_total{kind="export"}`) != 1 || metric(metrics, `sheetq_resumed_rows_total{kind="export"}`) != float64(last) {
		t.Errorf("the metrics do not count the resume of %d rows:\n%s", last, grepLines(metrics, "resume"))
	}
	if got := files(t, filepath.Join(data, "tmp", "resume"), "*"); len(got) != 0 {
		t.Errorf("resume files left after the export succeeded: %v", got)
	}
	return done, crashes
}

// sheets reads the worksheets' XML of an xlsx file, in order.
func sheets(t *testing.T, path string) []string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var out []string
	for n := 1; ; n++ {
		f, err := zr.Open(fmt.Sprintf("xl/worksheets/sheet%d.xml", n))
		if err != nil {
			return out
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s sheet %d: %v", path, n, err)
		}
		out = append(out, string(b))
	}
}

// sameSheets wants the files' worksheets equal, byte for byte: the same rows in the same
// order, none twice, none missing.
func sameSheets(t *testing.T, got, want string) {
	t.Helper()
	g, w := sheets(t, got), sheets(t, want)
	if len(g) != len(w) || len(g) == 0 {
		t.Fatalf("%d sheets, want %d", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("sheet %d differs from the uninterrupted export's (%d bytes, want %d)", i+1, len(g[i]), len(w[i]))
		}
	}
}

// The demo report, 60,000 rows over 6 s, killed with SIGKILL at about 25%, 50% and
// 90%: each restart resumes from the last checkpoint, and the file's sheet is the one an
// uninterrupted export of the same rows makes.
func TestResumeDemoAfterSIGKILL(t *testing.T) {
	const rows, seconds = 60_000, 6
	data := t.TempDir()
	done, _ := crashThrice(t, data, fmt.Sprintf(`{"report":"demo","params":{"rows":%d,"seconds":%d}}`, rows, seconds), rows, rows/seconds, resumeHeartbeat, nil)
	if done.Attempt != 4 || done.Progress.Rows != rows {
		t.Fatalf("succeeded on attempt %d with %d rows, want 4 and %d", done.Attempt, done.Progress.Rows, rows)
	}
	p := startBinary(t, data, nil)
	ref := p.submit(t, fmt.Sprintf(`{"report":"demo","params":{"rows":%d,"seconds":0}}`, rows))
	p.waitJob(t, ref.ID, "SUCCEEDED", status("SUCCEEDED"))
	p.kill(t)
	sameSheets(t, filepath.Join(data, "exports", done.ID+".xlsx"), filepath.Join(data, "exports", ref.ID+".xlsx"))
}

// An SQL report with "-- resume: id" over 1.5 million rows (two sheets), killed at about
// 25%, 50% and 90%: each restart continues after the last id written, across the sheet
// boundary, and the file is the uninterrupted export's.
func TestResumeSQLAfterSIGKILL(t *testing.T) {
	const rows = 1_500_000
	data := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(data, "big.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, amount REAL NOT NULL)`,
		fmt.Sprintf(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)
			INSERT INTO orders SELECT x, 'customer ' || (x %% 977), (x %% 10007) * 0.25 FROM c`, rows),
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	conf := "[sources.big]\ndriver = \"sqlite\"\npath = \"big.db\"\n"
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(data, "reports"), 0o755); err != nil {
		t.Fatal(err)
	}
	report := "-- title: Big orders\n-- source: big\n-- resume: id\n-- param: min int = 0\nSELECT id, customer, amount FROM orders WHERE id > :min ORDER BY id\n"
	if err := os.WriteFile(filepath.Join(data, "reports", "big.sql"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	// The rate only sizes the check's allowance of rows per heartbeat: generously high.
	// The export is fast: a heartbeat of 50 ms lets the API show its progress often.
	done, _ := crashThrice(t, data, `{"report":"big","params":{"min":0}}`, rows, 800_000, 50*time.Millisecond, nil)
	if done.Attempt != 4 || done.Progress.Rows != rows {
		t.Fatalf("succeeded on attempt %d with %d rows, want 4 and %d", done.Attempt, done.Progress.Rows, rows)
	}
	p := startBinary(t, data, nil)
	ref := p.submit(t, `{"report":"big","params":{"min":0}}`)
	p.waitJob(t, ref.ID, "SUCCEEDED", status("SUCCEEDED"))
	p.kill(t)
	got, want := filepath.Join(data, "exports", done.ID+".xlsx"), filepath.Join(data, "exports", ref.ID+".xlsx")
	if n := len(sheets(t, want)); n != 2 {
		t.Fatalf("the reference export has %d sheets, want 2", n)
	}
	sameSheets(t, got, want)
}

// startTestAPI builds and starts the test JSON API (internal/httpapitest) as a process
// of its own, which outlives the server's restarts, and returns its URL.
func startTestAPI(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sheetq-testapi")
	build := exec.Command("go", "build", "-o", bin, "./internal/httpapitest/cmd/sheetq-testapi")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sheetq-testapi: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("sheetq-testapi: %v", err)
	}
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("sheetq-testapi said %q", line)
	}
	return u
}

// An HTTP report over the test API, 30,000 rows in pages of 500 behind a cursor, paced
// at about 5 s, killed at about 25%, 50% and 90%: each restart resumes from the page of
// the last checkpoint, and the file is the uninterrupted export's.
func TestResumeHTTPAfterSIGKILL(t *testing.T) {
	const rows = 30_000
	api := startTestAPI(t, "-rows", fmt.Sprint(rows), "-page-size", "500", "-delay", "40ms")
	data := t.TempDir()
	conf := fmt.Sprintf("[sources.api]\ndriver = \"http\"\nbase_url = %q\nrate = 12\nallow_private = true\n", api+"/")
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(data, "reports"), 0o755); err != nil {
		t.Fatal(err)
	}
	report := "-- title: API items\n-- source: api\n-- request: GET cursor/items?limit=500\n-- rows: .data[]\n-- paginate: cursor .meta.next_cursor cursor\n"
	if err := os.WriteFile(filepath.Join(data, "reports", "items.sql"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	done, _ := crashThrice(t, data, `{"report":"items"}`, rows, rows/5, resumeHeartbeat, nil)
	if done.Attempt != 4 || done.Progress.Rows != rows {
		t.Fatalf("succeeded on attempt %d with %d rows, want 4 and %d", done.Attempt, done.Progress.Rows, rows)
	}
	p := startBinary(t, data, nil)
	ref := p.submit(t, `{"report":"items"}`)
	p.waitJob(t, ref.ID, "SUCCEEDED", status("SUCCEEDED"))
	p.kill(t)
	sameSheets(t, filepath.Join(data, "exports", done.ID+".xlsx"), filepath.Join(data, "exports", ref.ID+".xlsx"))
}

// scrape reads a server's /metrics.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	return string(b)
}

// metric is the value of the sample named name (with its labels) in a /metrics page,
// or -1.
func metric(page, name string) float64 {
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
