// Package sample installs the first-run sample: a small shop database, three reports
// over it and a config file naming it, so a new user can export something real at once.
package sample

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the sample database is SQLite

	"sheetq/internal/durable"
)

//go:embed reports/*.sql sheetq.toml
var files embed.FS

// Layout names where Install puts things; the zero value uses the defaults below.
type Layout struct {
	DataDir    string // the data directory
	ReportsDir string // default <data>/reports
	ConfigFile string // default <data>/sheetq.toml
}

// DBPath is where the sample database lives, relative to the data directory; the sample
// config file names it.
const DBPath = "sample/shop.db"

// Orders is how many orders the sample has.
const Orders = 200_000

// Install writes the sample into a data directory that has neither a config file nor a
// reports folder (a first run), and reports whether it did. Files that exist are never
// overwritten.
func Install(ctx context.Context, l Layout) (bool, error) {
	if l.ReportsDir == "" {
		l.ReportsDir = filepath.Join(l.DataDir, "reports")
	}
	if l.ConfigFile == "" {
		l.ConfigFile = filepath.Join(l.DataDir, "sheetq.toml")
	}
	if exists(l.ConfigFile) || exists(l.ReportsDir) {
		return false, nil
	}
	db := filepath.Join(l.DataDir, filepath.FromSlash(DBPath))
	if !exists(db) {
		if err := WriteDB(ctx, db); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(l.ReportsDir, 0o755); err != nil {
		return false, fmt.Errorf("sample reports: %w", err)
	}
	reports, _ := fs.Glob(files, "reports/*.sql")
	for _, name := range reports {
		if err := copyOut(name, filepath.Join(l.ReportsDir, filepath.Base(name))); err != nil {
			return false, err
		}
	}
	if err := copyOut("sheetq.toml", l.ConfigFile); err != nil {
		return false, err
	}
	return true, nil
}

func copyOut(name, dst string) error {
	b, err := files.ReadFile(name)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("sample %s: %w", name, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

var (
	firstNames = []string{"Ada", "Alan", "Barbara", "Claude", "Dennis", "Edsger", "Frances", "Grace", "Hedy",
		"Ivan", "Joan", "Ken", "Lynn", "Margaret", "Niklaus", "Ole", "Radia", "Sophie", "Tim", "Whitfield"}
	lastNames = []string{"Lovelace", "Turing", "Liskov", "Shannon", "Ritchie", "Dijkstra", "Allen", "Hopper",
		"Lamarr", "Sutherland", "Clarke", "Thompson", "Conway", "Hamilton", "Wirth", "Dahl", "Perlman",
		"Wilson", "Berners-Lee", "Diffie"}
	countries = []string{"Germany", "France", "Spain", "Italy", "Netherlands", "Poland", "Sweden", "Ireland", "Portugal", "Austria"}
	statuses  = []string{"paid", "paid", "paid", "paid", "shipped", "shipped", "pending", "refunded"}
	start     = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	end       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // three years of orders
)

// item is a kind of product, priced between min and max cents.
type item struct {
	noun     string
	min, max int
}

// categories are the shop's product categories, each with its own items and the
// words that suit them, so that a product's name, category and price agree (a tent is
// Outdoor and costs more than a mug).
var categories = []struct {
	name       string
	adjectives []string
	items      []item
}{
	{"Audio", []string{"Wireless", "Compact", "Studio", "Vintage", "Pro"},
		[]item{{"Headphones", 2900, 29900}, {"Speaker", 1900, 34900}, {"Earbuds", 1900, 19900}, {"Radio", 2400, 12900}}},
	{"Books", []string{"Illustrated", "Pocket", "Classic", "Hardcover", "Collector's"},
		[]item{{"Cookbook", 900, 4900}, {"Novel", 700, 2900}, {"Atlas", 1900, 8900}, {"Field guide", 900, 3900}}},
	{"Games", []string{"Family", "Classic", "Deluxe", "Travel", "Strategy"},
		[]item{{"Board game", 1900, 8900}, {"Puzzle", 900, 4900}, {"Card game", 500, 2900}, {"Chess set", 1900, 14900}}},
	{"Garden", []string{"Eco", "Heavy-duty", "Ceramic", "Folding", "Mini"},
		[]item{{"Planter", 900, 7900}, {"Hose", 1900, 6900}, {"Pruner", 1200, 5900}, {"Bird feeder", 900, 4900}}},
	{"Kitchen", []string{"Electric", "Ceramic", "Classic", "Pro", "Compact"},
		[]item{{"Kettle", 1900, 12900}, {"Mug", 500, 2900}, {"Knife set", 2900, 24900}, {"Blender", 3900, 19900}}},
	{"Office", []string{"Ergonomic", "Compact", "Classic", "Standing", "Smart"},
		[]item{{"Notebook", 300, 2900}, {"Desk lamp", 1900, 8900}, {"Chair", 8900, 49900}, {"Desk", 12900, 69900}}},
	{"Outdoor", []string{"Ultralight", "Folding", "Heavy-duty", "Family", "Compact"},
		[]item{{"Tent", 7900, 59900}, {"Backpack", 2900, 19900}, {"Grill", 4900, 39900}, {"Sleeping bag", 3900, 24900}}},
	{"Toys", []string{"Wooden", "Classic", "Giant", "Mini", "Rainbow"},
		[]item{{"Kite", 900, 4900}, {"Building set", 1900, 12900}, {"Plush bear", 900, 5900}, {"Toy train", 1900, 9900}}},
}

// WriteDB generates the sample shop database at path, deterministically: the same
// customers, products and orders every time.
func WriteDB(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sample database: %w", err)
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	db, err := sql.Open("sqlite", "file:"+tmp+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return fmt.Errorf("sample database: %w", err)
	}
	err = fill(ctx, db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sample database: %w", err)
	}
	return durable.Rename(tmp, path)
}

func fill(ctx context.Context, db *sql.DB) error {
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `
		CREATE TABLE customers (
			id        INTEGER PRIMARY KEY,
			name      TEXT NOT NULL,
			email     TEXT NOT NULL,
			country   TEXT NOT NULL,
			signed_up DATE NOT NULL
		);
		CREATE TABLE products (
			id       INTEGER PRIMARY KEY,
			name     TEXT NOT NULL,
			category TEXT NOT NULL,
			price    REAL NOT NULL
		);
		CREATE TABLE orders (
			id          INTEGER PRIMARY KEY,
			customer_id INTEGER NOT NULL REFERENCES customers (id),
			product_id  INTEGER NOT NULL REFERENCES products (id),
			quantity    INTEGER NOT NULL,
			unit_price  REAL NOT NULL,
			total       REAL NOT NULL,
			status      TEXT NOT NULL,
			paid        BOOLEAN NOT NULL,
			created_at  DATETIME NOT NULL,
			note        TEXT
		);
		CREATE INDEX orders_created_at ON orders (created_at);`); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(2023, 200_000))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }

	const nCustomers, nProducts = 2_000, 120
	ins, err := tx.PrepareContext(ctx, `INSERT INTO customers VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	for i := 1; i <= nCustomers; i++ {
		first, last := pick(firstNames), pick(lastNames)
		signed := start.AddDate(0, 0, -rng.IntN(3*365))
		email := fmt.Sprintf("%s.%s%d@example.com", lower(first), lower(last), i)
		if _, err := ins.ExecContext(ctx, i, first+" "+last, email, pick(countries), signed.Format(time.DateOnly)); err != nil {
			return err
		}
	}
	ins.Close()

	prices := make([]float64, nProducts+1)
	if ins, err = tx.PrepareContext(ctx, `INSERT INTO products VALUES (?, ?, ?, ?)`); err != nil {
		return err
	}
	for i := 1; i <= nProducts; i++ {
		cat := categories[rng.IntN(len(categories))]
		it := cat.items[rng.IntN(len(cat.items))]
		// Shop prices end in .99: whole euros from the item's range, less a cent.
		prices[i] = float64((it.min+rng.IntN(it.max-it.min+1))/100*100+99) / 100
		name := pick(cat.adjectives) + " " + it.noun
		if _, err := ins.ExecContext(ctx, i, name, cat.name, prices[i]); err != nil {
			return err
		}
	}
	ins.Close()

	if ins, err = tx.PrepareContext(ctx, `INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return err
	}
	defer ins.Close()
	span := end.Sub(start)
	// Orders arrive in time order, so ids and created_at agree, as in a real shop.
	step := span / Orders
	for i := 1; i <= Orders; i++ {
		at := start.Add(step*time.Duration(i-1) + time.Duration(rng.Int64N(int64(step))))
		product := 1 + rng.IntN(nProducts)
		qty := 1 + rng.IntN(4)
		if rng.IntN(10) == 0 {
			qty += rng.IntN(20)
		}
		total := float64(int64(prices[product]*float64(qty)*100+0.5)) / 100
		status := pick(statuses)
		var note any
		if rng.IntN(12) == 0 {
			note = pick([]string{"gift wrap", "leave at the door", "call before delivery", "express shipping"})
		}
		if _, err := ins.ExecContext(ctx, i, 1+rng.IntN(nCustomers), product, qty, prices[product], total,
			status, status != "pending" && status != "refunded", at.Format(time.DateTime), note); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c == ' ' || c == '-':
			b[i] = '.'
		}
	}
	return string(b)
}
