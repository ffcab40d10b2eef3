package sample

import (
	"crypto/sha256"
	"database/sql"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func TestInstallWritesSampleOnceAndDeterministically(t *testing.T) {
	dir := t.TempDir()
	ok, err := Install(t.Context(), Layout{DataDir: dir})
	if err != nil || !ok {
		t.Fatalf("Install = %v, %v; want true, nil", ok, err)
	}
	for _, p := range []string{"sheetq.toml", "reports/orders.sql", "reports/revenue_by_month.sql", "reports/all_orders.sql", DBPath} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBPath)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var first, last string
	if err := db.QueryRow(`SELECT count(*), min(created_at), max(created_at) FROM orders`).Scan(&n, &first, &last); err != nil {
		t.Fatal(err)
	}
	if n != Orders || first[:4] != "2023" || last[:4] != "2025" {
		t.Fatalf("orders: %d from %s to %s; want %d over 2023-2025", n, first, last, Orders)
	}
	checkProducts(t, db)

	// A second start leaves everything alone, even a user's edits.
	if err := os.WriteFile(filepath.Join(dir, "sheetq.toml"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := Install(t.Context(), Layout{DataDir: dir}); err != nil || ok {
		t.Fatalf("second Install = %v, %v; want false, nil", ok, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sheetq.toml")); string(b) != "# mine\n" {
		t.Fatalf("config overwritten: %q", b)
	}

	// Deterministic: generating again gives the same bytes.
	other := filepath.Join(t.TempDir(), "shop.db")
	if err := WriteDB(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, other) != fileSum(t, filepath.Join(dir, DBPath)) {
		t.Fatal("two generations of the sample database differ")
	}
}

// checkProducts checks that every product's category is the one its item belongs to,
// that its price is in the item's range, and that every category sells something.
func checkProducts(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`SELECT name, category, price FROM products`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var name, category string
		var price float64
		if err := rows.Scan(&name, &category, &price); err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, c := range categories {
			for _, it := range c.items {
				if strings.HasSuffix(name, " "+it.noun) && slices.Contains(c.adjectives, strings.TrimSuffix(name, " "+it.noun)) {
					cents := int(math.Round(price * 100))
					ok = c.name == category && cents >= it.min && cents <= it.max+99 && cents%100 == 99
				}
			}
		}
		if !ok {
			t.Errorf("product %q in category %q at %.2f does not fit its item", name, category, price)
		}
		seen[category] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(categories) {
		t.Errorf("categories sold: %v, want all %d", seen, len(categories))
	}
}
