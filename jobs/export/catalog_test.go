package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// catalogWaitLimit bounds every wait on the watcher; reaching it is a failure, not a pace.
const catalogWaitLimit = 15 * time.Second

// startCatalog starts a catalog of the built-ins and dir with a short debounce,
// stopped when the test ends.
func startCatalog(t *testing.T, dir string, log *slog.Logger) *Catalog {
	t.Helper()
	c := NewCatalog(dir, Builtin(), log)
	c.debounce = 20 * time.Millisecond
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// catalogSummary renders entries compactly: id=title for a report, id!line:message for a
// broken file, in the catalog's order.
func catalogSummary(entries []Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		var pe *ParseError
		switch {
		case e.Err == nil:
			parts[i] = e.Report.ID + "=" + e.Report.Title
		case errors.As(e.Err, &pe):
			parts[i] = fmt.Sprintf("%s!%d:%s", e.Report.ID, pe.Line, pe.Msg)
		default:
			parts[i] = e.Report.ID + "!" + e.Err.Error()
		}
	}
	return strings.Join(parts, ", ")
}

// waitCatalog waits until the catalog's summary is want, woken by its notifications.
func waitCatalog(t *testing.T, c *Catalog, want string) {
	t.Helper()
	changed, unsubscribe := c.Subscribe()
	defer unsubscribe()
	deadline := time.NewTimer(catalogWaitLimit)
	defer deadline.Stop()
	for {
		got := catalogSummary(c.Entries())
		if got == want {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("catalog never became\n  %s\nlast:\n  %s", want, got)
		}
	}
}

func reportSource(title string, extra ...string) string {
	return "-- title: " + title + "\n-- source: shop\n" + strings.Join(extra, "\n") + "\nSELECT 1\n"
}

func writeReportFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceReportFile saves like many editors do: write a temporary file, rename it over.
func replaceReportFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeReportFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestCatalogLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	if err := os.MkdirAll(filepath.Join(dir, "sub.sql"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"orders.sql":     reportSource("Orders"),
		"broken.sql":     "-- source: shop\n-- titel: x\nSELECT 1",
		"demo.sql":       reportSource("My demo"),
		"Upper.SQL":      reportSource("Upper"),
		"notes.txt":      "not a report",
		".hidden.sql":    "ignored",
		".#orders.sql":   "emacs lock",
		"orders.sql~":    "backup",
		"orders.sql.swp": "vim swap",
		"~$orders.sql":   "office lock",
		"#orders.sql#":   "emacs autosave",
		"sub.sql/x.sql":  reportSource("In a subfolder"),
	}
	for name, content := range files {
		writeReportFile(t, filepath.Join(dir, name), content)
	}
	c := startCatalog(t, dir, nil)

	// Sorted by id, bytewise; the built-in demo comes before the file that reuses its id.
	want := `Upper!0:report file name "Upper.SQL" must end in .sql, ` +
		`broken!2:unknown key "titel" (known keys: title, source, param, sheet, count, queue, description, column, filename, access, resume, request, rows, paginate, encrypt; a free comment must not start with a lowercase "word:"), ` +
		`demo=Demo rows, ` +
		`demo!0:report id "demo" is reserved for the built-in report, ` +
		`orders=Orders`
	if got := catalogSummary(c.Entries()); got != want {
		t.Fatalf("entries\n got %s\nwant %s", got, want)
	}
	for _, e := range c.Entries() {
		if e.Report.ID == "demo" && e.Err == nil && e.File != "" {
			t.Errorf("built-in demo has a file: %+v", e)
		}
		if e.Report.ID == "orders" && (e.File != filepath.Join(filepath.Base(dir), "orders.sql") || e.Report.File != e.File) {
			t.Errorf("orders: file %q, report file %q", e.File, e.Report.File)
		}
	}

	rep, err := c.Report("orders")
	if err != nil || rep.Title != "Orders" || rep.Query != "SELECT 1" {
		t.Fatalf("Report(orders) = %+v, %v", rep, err)
	}
	if rep, err := c.Report("demo"); err != nil || rep.Title != "Demo rows" {
		t.Fatalf("Report(demo) = %+v, %v: the built-in wins over a file", rep, err)
	}
	_, err = c.Report("broken")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != filepath.Join(filepath.Base(dir), "broken.sql") || pe.Line != 2 {
		t.Fatalf("Report(broken) err = %#v, want the *ParseError of line 2", err)
	}
	_, err = c.Report("nope")
	if !errors.Is(err, ErrUnknownReport) || err.Error() != `unknown report "nope"` {
		t.Fatalf("Report(nope) err = %v", err)
	}

	// What a caller gets is a copy.
	rep, _ = c.Report("demo")
	rep.Params[0].Name = "changed"
	if again, _ := c.Report("demo"); again.Params[0].Name != "rows" {
		t.Fatal("changing a returned report changed the catalog")
	}
	var _ Library = c
}

// A report's column lines come with it, and a caller's copy is its own.
func TestCatalogReportColumns(t *testing.T) {
	dir := t.TempDir()
	writeReportFile(t, filepath.Join(dir, "labelled.sql"), reportSource("Labelled", `-- column: total "Total" number(0.00)`, "-- filename: all"))
	c := startCatalog(t, dir, nil)
	want := []ColumnSpec{{Name: "total", Label: "Total", Type: TypeNumber, Format: "0.00"}}
	rep, err := c.Report("labelled")
	if err != nil || !reflect.DeepEqual(rep.Columns, want) || rep.Filename != "all" {
		t.Fatalf("Report(labelled) = %+v, %v", rep, err)
	}
	rep.Columns[0].Label = "changed"
	for _, e := range c.Entries() {
		if e.Report.ID == "labelled" {
			e.Report.Columns[0].Format = "changed"
		}
	}
	if again, _ := c.Report("labelled"); !reflect.DeepEqual(again.Columns, want) {
		t.Fatalf("changing a returned report's columns changed the catalog: %+v", again.Columns)
	}
}

func TestCatalogBeforeStartHasBuiltins(t *testing.T) {
	c := NewCatalog(t.TempDir(), Builtin(), nil)
	if got, want := catalogSummary(c.Entries()), "demo=Demo rows"; got != want {
		t.Fatalf("entries %s, want %s", got, want)
	}
	if _, err := c.Report("demo"); err != nil {
		t.Fatal(err)
	}
	c.Stop() // a no-op before Start
}

func TestCatalogStartStop(t *testing.T) {
	dir := t.TempDir()
	c := NewCatalog(dir, nil, nil)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err == nil {
		t.Fatal("a second Start succeeded")
	}
	c.Stop()
	c.Stop()
	// Stopped, it keeps its reports and can start again.
	writeReportFile(t, filepath.Join(dir, "a.sql"), reportSource("A"))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := catalogSummary(c.Entries()); got != "a=A" {
		t.Fatalf("entries %s", got)
	}
	c.Stop()

	// A folder that cannot be created is an error.
	file := filepath.Join(t.TempDir(), "file")
	writeReportFile(t, file, "")
	if err := NewCatalog(file, nil, nil).Start(t.Context()); err == nil {
		t.Fatal("Start on a file succeeded")
	}
}

// TestCatalogRunsUntilStop: like every background service (ARCHITECTURE.md, "Services"),
// the watcher outlives the context it was started with: a report written after that
// context ended is still loaded. Stop ends it and waits.
func TestCatalogRunsUntilStop(t *testing.T) {
	dir := t.TempDir()
	c := NewCatalog(dir, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	writeReportFile(t, filepath.Join(dir, "orders.sql"), reportSource("Orders"))
	waitCatalog(t, c, "orders=Orders")
	done := c.done
	c.Stop()
	select {
	case <-done:
	default:
		t.Fatal("Stop returned before the watcher ended")
	}
}

func TestCatalogHotReload(t *testing.T) {
	dir := t.TempDir()
	c := startCatalog(t, dir, nil)
	waitCatalog(t, c, "demo=Demo rows")
	orders := filepath.Join(dir, "orders.sql")

	writeReportFile(t, orders, reportSource("Orders"))
	waitCatalog(t, c, "demo=Demo rows, orders=Orders")

	writeReportFile(t, orders, reportSource("Orders v2"))
	waitCatalog(t, c, "demo=Demo rows, orders=Orders v2")

	replaceReportFile(t, orders, reportSource("Orders v3"))
	waitCatalog(t, c, "demo=Demo rows, orders=Orders v3")

	// Broken, it stays listed with its error; fixed, it is back.
	replaceReportFile(t, orders, reportSource("Orders v4", "-- param: from date")) // declared, never used
	waitCatalog(t, c, `demo=Demo rows, orders!3:param "from" is not used in the query (no :from)`)
	if _, err := c.Report("orders"); err == nil || !strings.Contains(err.Error(), "orders.sql:3: param \"from\"") {
		t.Fatalf("Report(orders) err = %v", err)
	}
	replaceReportFile(t, orders, reportSource("Orders v5"))
	waitCatalog(t, c, "demo=Demo rows, orders=Orders v5")

	// Renamed to another .sql name: the id follows the file.
	if err := os.Rename(orders, filepath.Join(dir, "sales.sql")); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, c, "demo=Demo rows, sales=Orders v5")
	if _, err := c.Report("orders"); !errors.Is(err, ErrUnknownReport) {
		t.Fatalf("Report(orders) after rename: %v", err)
	}

	// Renamed to a name that is not a report: gone; and back.
	if err := os.Rename(filepath.Join(dir, "sales.sql"), filepath.Join(dir, "sales.sql.bak")); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, c, "demo=Demo rows")
	if err := os.Rename(filepath.Join(dir, "sales.sql.bak"), filepath.Join(dir, "sales.sql")); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, c, "demo=Demo rows, sales=Orders v5")

	if err := os.Remove(filepath.Join(dir, "sales.sql")); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, c, "demo=Demo rows")
}

func TestCatalogBurst(t *testing.T) {
	dir := t.TempDir()
	c := startCatalog(t, dir, nil)

	// Readers run through every reload (for the race detector).
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, e := range c.Entries() {
					_, _ = c.Report(e.Report.ID)
				}
			}
		})
	}
	defer func() { close(stop); readers.Wait() }()

	orders := filepath.Join(dir, "orders.sql")
	for i := range 50 {
		writeReportFile(t, orders, reportSource(fmt.Sprintf("Orders v%d", i)))
	}
	want := []string{"demo=Demo rows", "orders=Orders v49"}
	for i := range 20 {
		id := fmt.Sprintf("r%02d", i)
		writeReportFile(t, filepath.Join(dir, id+".sql"), reportSource("Report "+id))
		want = append(want, id+"=Report "+id)
	}
	waitCatalog(t, c, strings.Join(want, ", "))
}

func TestCatalogFolderRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	c := startCatalog(t, dir, nil) // creates it
	writeReportFile(t, filepath.Join(dir, "a.sql"), reportSource("A"))
	waitCatalog(t, c, "a=A, demo=Demo rows")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, c, "demo=Demo rows")
}

func TestCatalogLogsBrokenFileOncePerChange(t *testing.T) {
	dir := t.TempDir()
	var buf catalogLogBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	broken := filepath.Join(dir, "broken.sql")
	writeReportFile(t, broken, "-- source: shop\n-- count: maybe\nSELECT 1")
	c := startCatalog(t, dir, log)

	warnings := func() []string {
		var out []string
		for line := range strings.SplitSeq(buf.String(), "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="report file is broken"`) {
				out = append(out, line)
			}
		}
		return out
	}
	w := warnings()
	if len(w) != 1 || !strings.Contains(w[0], "file="+broken) || !strings.Contains(w[0], "line=2") ||
		!strings.Contains(w[0], `error="count must be true or false, not \"maybe\""`) {
		t.Fatalf("warnings after start:\n%s", strings.Join(w, "\n"))
	}

	// Another file's change reloads the folder, but the unchanged broken file is not
	// logged again.
	replaceReportFile(t, filepath.Join(dir, "ok.sql"), reportSource("OK"))
	waitCatalog(t, c, `broken!2:count must be true or false, not "maybe", demo=Demo rows, ok=OK`)
	if w := warnings(); len(w) != 1 {
		t.Fatalf("warnings after an unrelated change:\n%s", strings.Join(w, "\n"))
	}

	replaceReportFile(t, broken, "-- source: shop\n\n-- count: no\nSELECT 1")
	waitCatalog(t, c, `broken!3:count must be true or false, not "no", demo=Demo rows, ok=OK`)
	if w := warnings(); len(w) != 2 || !strings.Contains(w[1], "line=3") {
		t.Fatalf("warnings after the broken file changed:\n%s", strings.Join(w, "\n"))
	}

	replaceReportFile(t, broken, reportSource("Fixed"))
	waitCatalog(t, c, `broken=Fixed, demo=Demo rows, ok=OK`)
	if w := warnings(); len(w) != 2 {
		t.Fatalf("warnings after the fix:\n%s", strings.Join(w, "\n"))
	}
}

func TestCatalogSubscribe(t *testing.T) {
	dir := t.TempDir()
	c := startCatalog(t, dir, nil)
	changed, unsubscribe := c.Subscribe()
	writeReportFile(t, filepath.Join(dir, "a.sql"), reportSource("A"))
	select {
	case <-changed:
	case <-time.After(catalogWaitLimit):
		t.Fatal("no notification after a file was added")
	}
	unsubscribe()
	unsubscribe() // idempotent
	c.subMu.Lock()
	n := len(c.subs)
	c.subMu.Unlock()
	if n != 0 {
		t.Fatalf("%d subscribers left after unsubscribe", n)
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	writeReportFile(t, filepath.Join(dir, "b.sql"), reportSource("B"))
	writeReportFile(t, filepath.Join(dir, "a.sql"), "-- source: shop\n")
	writeReportFile(t, filepath.Join(dir, "demo.sql"), reportSource("Demo"))
	writeReportFile(t, filepath.Join(dir, "big.sql"), "-- source: shop\nSELECT 1"+strings.Repeat(" ", MaxReportSize))
	writeReportFile(t, filepath.Join(dir, "x.sql~"), "ignored")
	entries, err := CheckDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "a!0:no query after the header, b=B, big!0:file is larger than 1048576 bytes, " +
		`demo!0:report id "demo" is reserved for the built-in report`
	if got := catalogSummary(entries); got != want {
		t.Fatalf("entries\n got %s\nwant %s", got, want)
	}
	if _, err := CheckDir(filepath.Join(dir, "missing"), nil); err == nil {
		t.Fatal("CheckDir of a missing folder succeeded")
	}
}

// TestCheckDirDanglingLink: a report file that is a link to nothing is a broken entry,
// not a file that vanished during the scan, which used to drop it from the list without
// a word.
func TestCheckDirDanglingLink(t *testing.T) {
	dir := t.TempDir()
	writeReportFile(t, filepath.Join(dir, "good.sql"), reportSource("Good"))
	if err := os.Symlink(filepath.Join(dir, "moved", "orders.sql"), filepath.Join(dir, "orders.sql")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	entries, err := CheckDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "good=Good, orders!0:read: a link to a file that does not exist"
	if got := catalogSummary(entries); got != want {
		t.Fatalf("entries\n got %s\nwant %s", got, want)
	}
}

func TestIsReportFileName(t *testing.T) {
	tests := map[string]bool{
		"orders.sql": true, "Orders.SQL": true, "a.Sql": true, "-x.sql": true,
		".sql": false, "sql": false, ".orders.sql": false, ".#orders.sql": false, "#orders.sql#": false,
		"orders.sql~": false, "orders.sql.swp": false, "~$orders.sql": false, "orders.txt": false, "": false,
	}
	for name, want := range tests {
		if got := isReportFileName(name); got != want {
			t.Errorf("isReportFileName(%q) = %v, want %v", name, got, want)
		}
	}
}

// catalogLogBuffer is a log destination the watcher goroutine and the test share.
type catalogLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *catalogLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *catalogLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCatalogRefusesUndefinedQueue: a report that names a queue the config does not
// define would be accepted into a lane that nothing runs; it is a load error at the
// line that names it, while a defined queue is kept in the report (and so in the args
// snapshot of its exports).
func TestCatalogRefusesUndefinedQueue(t *testing.T) {
	dir := t.TempDir()
	writeReportFile(t, filepath.Join(dir, "big.sql"), "-- source: shop\n-- queue: heavy\nSELECT 1")
	writeReportFile(t, filepath.Join(dir, "odd.sql"), "-- title: Odd\n-- source: shop\n-- queue: nowhere\nSELECT 1")
	c := NewCatalog(dir, nil, nil)
	c.SetQueues([]string{"exports", "heavy", "webhooks"})
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	want := `big=big, odd!3:queue "nowhere" is not defined: add [queues.nowhere] to the config file, or name one of exports, heavy, webhooks`
	if got := catalogSummary(c.Entries()); got != want {
		t.Fatalf("entries\n got %s\nwant %s", got, want)
	}
	rep, err := c.Report("big")
	if err != nil || rep.Queue != "heavy" {
		t.Fatalf("Report(big) = %+v, %v; want queue heavy", rep, err)
	}
	kind := New(Config{Library: c, Sources: map[string]Source{"shop": demoSource{}}})
	args, err := kind.Validate("big", nil)
	if err != nil || args.Queue() != "heavy" {
		t.Fatalf("Validate(big) = %+v, %v; want the snapshot's queue heavy", args, err)
	}
}
