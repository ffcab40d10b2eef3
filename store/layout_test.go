package store_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// drivers are the job store's drivers (ARCHITECTURE.md, "Job store drivers").
var drivers = []string{"sheetq/store/sqlite", "sheetq/store/pg", "sheetq/store/mysql"}

// mayImportDrivers are the packages that choose a driver: the composition root, the
// tool commands (doctor, backup, store copy, the benchmarks' commands) and the test
// helpers for a SQLite file. Every other package sees the core only.
var mayImportDrivers = []string{
	"sheetq/app",
	"sheetq/internal/cli",
	"sheetq/store/pgcopy",
	"sheetq/store/mysqlcopy",
	"sheetq/store/storetest",
	"sheetq/bench/river",
	"sheetq/jobs/export/internal/xlsxbench",
}

// TestImportGraph holds the layout of the job store: no package but the composition root
// and the tool commands imports a driver, app/problem imports none, and no driver
// imports another. Only non-test files count: a test may open whichever driver it needs.
func TestImportGraph(t *testing.T) {
	imports := moduleImports(t, "..")
	if len(imports["sheetq/app/api"]) == 0 || len(imports["sheetq/store/sqlite"]) == 0 {
		t.Fatalf("read no imports of app/api or store/sqlite: the walk is broken (%d packages)", len(imports))
	}
	for pkg, deps := range imports {
		for _, dep := range deps {
			if !slices.Contains(drivers, dep) {
				continue
			}
			switch {
			case slices.Contains(drivers, pkg):
				t.Errorf("driver %s imports driver %s", pkg, dep)
			case pkg == "sheetq/app/problem":
				t.Errorf("app/problem imports driver %s: classify faults by the core's errors", dep)
			case !slices.Contains(mayImportDrivers, pkg):
				t.Errorf("%s imports driver %s: only the composition root and the tool commands choose a driver", pkg, dep)
			}
		}
	}
	for _, d := range drivers {
		if !slices.Contains(imports[d], "sheetq/store") {
			t.Errorf("driver %s does not import the core, sheetq/store", d)
		}
	}
}

// moduleImports reads the import paths of every non-test Go file under root, the module
// sheetq, by package.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := path.Join("sheetq", filepath.ToSlash(rel))
		for _, im := range f.Imports {
			v, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if !slices.Contains(out[pkg], v) {
				out[pkg] = append(out[pkg], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
	return out
}
