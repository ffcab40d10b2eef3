package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `sheetq reports check` shows what a report's header says about its file: the
// description, the filename pattern and each column line, as the lines read; a broken
// column line fails with its file and line.
func TestReportsCheckShowsColumns(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("orders.sql", `-- title: Orders
-- description: Every order of a period.
-- description: Money as money.
-- source: shop
-- param: from date
-- filename: orders-{from}
-- column: unit_price "Unit \"net\" price" number(#,##0.00)
-- column: created_at "Created" datetime
-- column: note
SELECT :from;
`)
	out, errOut, code := runCLI(t, "reports", "check", dir)
	want := `ok  orders  Orders (source shop, 1 param, 3 column lines)
            Every order of a period.
            Money as money.
            filename: orders-{from} (+ .xlsx or .csv)
            column: unit_price "Unit \"net\" price" number(#,##0.00)
            column: created_at "Created" datetime
            column: note
`
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("exit %d, output:\n%s%s\nwant it to start with:\n%s", code, out, errOut, want)
	}

	write("bad.sql", "-- source: shop\n-- column: total money\nSELECT 1;\n")
	out, errOut, code = runCLI(t, "reports", "check", dir)
	if wantLine := "FAIL          " + filepath.Join(dir, "bad.sql") + `:2: column "total": unknown type "money"`; code != 1 || !strings.Contains(out, wantLine) {
		t.Fatalf("exit %d, want 1 and %q in:\n%s%s", code, wantLine, out, errOut)
	}
	if strings.Count(strings.TrimSpace(errOut), "\n") != 0 || errOut == "" {
		t.Fatalf("want one line on stderr, got %q", errOut)
	}
}

// reports check lines its columns up (status, id, title and the details under it),
// whatever the lengths of the ids, and counts in the singular and the plural.
func TestReportsCheckAligns(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.sql":                   "-- title: A\n-- source: shop\n-- param: from date\n-- column: note\nSELECT :from;\n",
		"customers_by_region.sql": "-- title: Customers by region and year\n-- source: shop\n-- param: from date\n-- param: to date\nSELECT :from, :to;\n",
		"none.sql":                "-- title: None\n-- source: shop\nSELECT 1;\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, "reports", "check", dir)
	want := `ok  a                    A (source shop, 1 param, 1 column line)
                         column: note
ok  customers_by_region  Customers by region and year (source shop, 2 params, 0 column lines)
ok  none                 None (source shop, 0 params, 0 column lines)
3 report files in ` + dir + ` are valid
`
	if code != 0 || out != want {
		t.Fatalf("exit %d, output:\n%s%s\nwant:\n%s", code, out, errOut, want)
	}
}
