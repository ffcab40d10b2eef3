package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsNameNoServerPaths: the errors a job or GET /api/v1/reports shows name
// files relative to the config file's folder (the data directory by default) or the
// reports folder, never by the server's absolute path.
func TestErrorsNameNoServerPaths(t *testing.T) {
	base := t.TempDir() // the config file's folder
	noPath := func(t *testing.T, what, msg, want string) {
		t.Helper()
		if strings.Contains(msg, base) || strings.Contains(msg, os.TempDir()+string(filepath.Separator)) {
			t.Errorf("%s: %q shows a server path", what, msg)
		}
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
	stream := func(t *testing.T, sc SourceConfig, query string) string {
		t.Helper()
		src, err := OpenSource("shop", sc, base)
		if err != nil {
			t.Fatal(err)
		}
		_, err = srcStream(t.Context(), t, src, srcReport(query), nil)
		if err == nil {
			t.Fatalf("%+v: no error", sc)
		}
		return err.Error()
	}

	if err := os.MkdirAll(filepath.Join(base, "data", "shop.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A table file that cannot be opened: a link to nowhere.
	if err := os.Symlink(filepath.Join(base, "nowhere.csv"), filepath.Join(base, "files", "sales.csv")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		sc    SourceConfig
		query string
		want  string
	}{
		{"missing sqlite file", SourceConfig{Driver: "sqlite", Path: "data/gone.db"}, "SELECT 1",
			"database file " + filepath.Join("data", "gone.db") + " does not exist"},
		{"absolute sqlite path", SourceConfig{Driver: "sqlite", Path: filepath.Join(base, "data", "gone.db")}, "SELECT 1",
			"database file " + filepath.Join("data", "gone.db") + " does not exist"},
		{"sqlite path outside", SourceConfig{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "far.db")}, "SELECT 1",
			"database file far.db does not exist"},
		{"sqlite folder", SourceConfig{Driver: "sqlite", Path: "data/shop.db"}, "SELECT 1",
			filepath.Join("data", "shop.db") + " is a folder"},
		{"missing csv folder", SourceConfig{Driver: "csv", Path: "gone"}, "SELECT * FROM sales",
			"folder gone does not exist"},
		{"csv file that cannot be opened", SourceConfig{Driver: "csv", Path: "files"}, "SELECT * FROM sales",
			"open " + filepath.Join("files", "sales.csv") + ": no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			noPath(t, c.name, stream(t, c.sc, c.query), c.want)
		})
	}

	t.Run("report files", func(t *testing.T) {
		dir := filepath.Join(base, "reports")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeReportFile(t, filepath.Join(dir, "orders.sql"), "-- source: shop\n-- titel: x\nSELECT 1")
		writeReportFile(t, filepath.Join(dir, "ok.sql"), reportSource("OK"))
		cat := NewCatalog(dir, Builtin(), nil)
		if err := cat.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer cat.Stop()
		for _, e := range cat.Entries() {
			if e.File == "" {
				continue // a built-in
			}
			noPath(t, "entry file", e.File, filepath.Join("reports", e.Report.ID+".sql"))
			noPath(t, "report file", e.Report.File, filepath.Join("reports", e.Report.ID+".sql"))
		}
		_, err := cat.Report("orders")
		if err == nil {
			t.Fatal("a broken report loaded")
		}
		noPath(t, "parse error", err.Error(), filepath.Join("reports", "orders.sql")+`:2: unknown key "titel"`)
	})
}
