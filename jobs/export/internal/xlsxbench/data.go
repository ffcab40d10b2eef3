package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers "sqlite"

	"sheetq/jobs/export"
)

// schemaVersion names the generated files; bump it when the data below changes.
const schemaVersion = 1

// The benchmark table: ten columns of mixed types, with NULLs and some integers
// beyond 2^53 (which the writer keeps as text).
const schema = `CREATE TABLE orders (
	id         INTEGER PRIMARY KEY,
	customer   TEXT NOT NULL,
	amount     REAL NOT NULL,
	quantity   INTEGER NOT NULL,
	paid       BOOLEAN NOT NULL,
	order_date DATE NOT NULL,
	created_at DATETIME NOT NULL,
	note       TEXT,
	discount   REAL,
	ref        INTEGER NOT NULL
)`

var columnNames = []string{"id", "customer", "amount", "quantity", "paid", "order_date", "created_at", "note", "discount", "ref"}

var (
	firstNames = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Margaret", "Dennis", "Radia", "Linus"}
	lastNames  = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Hamilton", "Ritchie", "Perlman", "Torvalds"}
	notes      = []string{"rush order", "gift wrap, please", "call before delivery", "second attempt; leave at the door"}
	epoch      = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ensureDB returns the path of the SQLite file with n rows, generating it once.
func ensureDB(ctx context.Context, dir string, n int64, log io.Writer) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("orders-v%d-%d.db", schemaVersion, n))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	fmt.Fprintf(log, "generating %s...\n", path)
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := generate(ctx, tmp, n); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("generate %s: %w", path, err)
	}
	// The rename marks the file complete: an interrupted generation leaves only .tmp.
	return path, os.Rename(tmp, path)
}

func generate(ctx context.Context, path string, n int64) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i := range n {
		h := splitmix64(0x5eed + uint64(i))
		h2 := splitmix64(h)
		day := epoch.AddDate(0, 0, int(h>>8%730))
		var note, discount any
		if k := h >> 60; k < uint64(len(notes)) {
			note = notes[k]
		}
		if h2&1 == 0 {
			discount = float64(h2>>8%5000) / 100
		}
		ref := int64(h2 >> 12 % 1_000_000_000)
		if h2>>50%16 == 0 {
			ref = 1<<53 + int64(h2>>20%1_000_000) // beyond a double's exact integers
		}
		if _, err := stmt.ExecContext(ctx,
			i+1,
			firstNames[h%10]+" "+lastNames[h>>4%10],
			float64(h>>20%1_000_000)/100,
			int64(h>>32%100)+1,
			h>>40%4 != 0,
			day.Format("2006-01-02"),
			day.Add(time.Duration(h>>44%86_400)*time.Second).Format("2006-01-02 15:04:05"),
			note, discount, ref,
		); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// newSource returns the source every mode reads the benchmark file with: the export
// package's own SQLite source, so the modes differ only in how they write.
func newSource(path string) (export.Source, func(), error) {
	src, err := export.OpenSource("bench", export.SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		return nil, nil, err
	}
	return src, func() {
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
	}, nil
}
