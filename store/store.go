package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// ErrNotFound is returned when a row asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by Enqueue once Close has begun.
var ErrClosed = errors.New("store closed")

// ErrLeaseLost is returned by fenced updates when the execution no longer owns the job:
// another attempt claimed it, it was recovered, or it left PROCESSING.
var ErrLeaseLost = errors.New("lease lost")

// ErrConflict is returned when a unique constraint refuses a write.
var ErrConflict = errors.New("conflict")

// ErrUnstorable is returned when a store refuses a value it was given and would refuse
// it again, however often asked: PostgreSQL's text cannot hold a NUL character (U+0000),
// and a json string that holds one (\u0000), or half of a UTF-16 surrogate pair, cannot
// be read back as text (issue 36). The app answers it 422; the engine does not retry an
// end of an attempt that meets it (ARCHITECTURE.md, rule 14).
var ErrUnstorable = errors.New("holds a NUL character or another value the database cannot store")

// Migration is one numbered schema change, NNNN_name.sql, of a store's embedded folder.
type Migration struct {
	Version int
	Name    string // the file's base name
	SQL     string
}

// ReadMigrations reads the migrations/*.sql files of fsys in order of their numbers, and
// refuses a name without a number or two files with one number (the second would be
// taken as applied and skipped). Every store applies its own folder this way.
func ReadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad migration name %q", base)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("%s and %s have the same number", other, base)
		}
		seen[version] = base
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: version, Name: base, SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	return ms, nil
}
