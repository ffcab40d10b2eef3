package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The documents cite the tests that hold each rule as package.TestName (ARCHITECTURE.md,
// "Rules"); a test that moves to another package, or is renamed, must take its citations
// along, or a reader looks for a test that is not there.

var (
	citedTest = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	testFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	pkgClause = regexp.MustCompile(`(?m)^package (\w+)`)
)

// TestCitedTestsExist checks every package.TestName in the Markdown files against the
// test functions of the module: the package (its name, _test dropped) must define it.
func TestCitedTestsExist(t *testing.T) {
	defined := testFuncs(t, "..")
	if len(defined["docs"]) == 0 || len(defined["sqlite"]) == 0 {
		t.Fatalf("read no tests of docs or sqlite: the walk is broken (%d packages)", len(defined))
	}
	for _, file := range checkedFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range citedTest.FindAllStringSubmatch(string(b), -1) {
			pkg, name := m[1], m[2]
			if pkg == "package" { // the form itself, as ARCHITECTURE.md explains it
				continue
			}
			if !defined[pkg][name] {
				t.Errorf("%s cites %s.%s, which package %s does not define", filepath.Base(file), pkg, name, pkg)
			}
		}
	}
}

// TestACitationToNowhereIsFound: the check sees a citation of a test that does not exist.
func TestACitationToNowhereIsFound(t *testing.T) {
	defined := map[string]map[string]bool{"sqlite": {"TestConformance": true}}
	for _, c := range []struct {
		text string
		ok   bool
	}{{"`sqlite.TestConformance`", true}, {"`store.TestConformance`", false}, {"`sqlite.TestGone`", false}} {
		m := citedTest.FindStringSubmatch(c.text)
		if m == nil || defined[m[1]][m[2]] != c.ok {
			t.Errorf("%s: found %v, want %v", c.text, m != nil && defined[m[1]][m[2]], c.ok)
		}
	}
}

// testFuncs reads the Test, Benchmark and Fuzz functions of every _test.go file under
// root, by package name.
func testFuncs(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
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
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m := pkgClause.FindSubmatch(b)
		if m == nil {
			return nil
		}
		pkg := strings.TrimSuffix(string(m[1]), "_test")
		if out[pkg] == nil {
			out[pkg] = map[string]bool{}
		}
		for _, f := range testFunc.FindAllSubmatch(b, -1) {
			out[pkg][string(f[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
