package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/jobs"
)

// TestLoadFileConfigRefuses: a config file that cannot be used refuses the start with
// an error naming the file and the key, never a value dropped without a word.
func TestLoadFileConfigRefuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sheetq.toml")
	for _, tc := range []struct {
		name, conf, err string
	}{
		// The decoder took a value that is not a table, for a key read into a map, as no
		// value at all: the sources, [serve] settings, lanes or params were dropped.
		{"sources not a table", "sources = 3\n", "sources must be a table"},
		{"serve not a table", "serve = \"workers=4\"\n", "serve must be a table"},
		{"queues an array", "queues = []\n", "queues must be a table"},
		{"params not a table", "[[schedules]]\nid = \"a\"\nparams = { rows = 1 }\n[[schedules]]\nid = \"b\"\nparams = 7\n",
			"schedules.params of [[schedules]] 2 must be a table"},
		{"unknown key", "[queues.heavy]\nworker = 2\n", "unknown key queues.heavy.worker"},
		{"syntax", "[store]\nurl = = 1\n", "line 2: expected value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "sheetq.toml")
			if err := os.WriteFile(path, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFileConfig(path, false)
			if err == nil || !strings.HasPrefix(err.Error(), "config "+path+": ") || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want config %s: ...%s", err, path, tc.err)
			}
		})
	}
	// A value checked after the read, such as a lane's size, names the file too.
	if err := os.WriteFile(path, []byte("[queues.heavy]\nworkers = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFileConfig(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Lanes(jobs.Config{Workers: 2}, false); err == nil || err.Error() != "config "+path+": [queues.heavy] workers must be from 1 to 256, not 0" {
		t.Fatalf("Lanes err = %v, want one naming %s", err, path)
	}
	// Tables of those keys, and none, still load.
	if err := os.WriteFile(path, []byte("queues = {}\n[serve]\nworkers = 2\n[[schedules]]\nid = \"a\"\nparams = { rows = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fc, err := LoadFileConfig(path, false); err != nil || fc.Schedules[0].Params["rows"] != int64(1) {
		t.Fatalf("LoadFileConfig = %+v, %v", fc, err)
	}
}

// TestLoadFileConfigDanglingLink: the default config file (optional: missing is an
// empty config) that is a link to nothing is refused, instead of taken for no file and
// the server started without its tokens, sources and lanes.
func TestLoadFileConfigDanglingLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sheetq.toml")
	if fc, err := LoadFileConfig(path, true); err != nil || fc.Sources != nil {
		t.Fatalf("a missing default file: %+v, %v; want an empty config", fc, err)
	}
	if err := os.Symlink(filepath.Join(dir, "secrets", "sheetq.toml"), path); err != nil {
		t.Skipf("symlink: %v", err)
	}
	for _, optional := range []bool{true, false} {
		if _, err := LoadFileConfig(path, optional); err == nil || err.Error() != "config "+path+": a link to a file that does not exist" {
			t.Errorf("optional %v: err = %v, want the link to nothing named", optional, err)
		}
	}
}
