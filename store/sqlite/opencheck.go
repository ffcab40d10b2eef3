package sqlite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sheetq/store"
	"strings"
	"time"
)

// CheckMode is how much of an existing database file Open reads before it is used.
type CheckMode string

const (
	// CheckQuick (the default) checks the header and the file's length, looks for pages
	// that are all zeros, and runs PRAGMA quick_check for what is left of
	// Options.CheckBudget. A quick_check cut short is finished after start with
	// FinishCheck (CheckResult.Complete says whether it is needed).
	CheckQuick CheckMode = "quick"
	// CheckFull does what CheckQuick does, then PRAGMA integrity_check to the end, with
	// no time limit: it also compares every index with its table, which takes minutes on
	// a file of gigabytes.
	CheckFull CheckMode = "full"
	// CheckOff opens the file as it is.
	CheckOff CheckMode = "off"
)

// ParseCheckMode reads a --check-db value.
func ParseCheckMode(s string) (CheckMode, error) {
	switch m := CheckMode(strings.ToLower(strings.TrimSpace(s))); m {
	case CheckQuick, CheckFull, CheckOff:
		return m, nil
	}
	return "", fmt.Errorf("%q: want quick, full or off", s)
}

// CheckResult is what Open's check of the file did.
type CheckResult struct {
	Mode  CheckMode
	Pages int64 // pages in the file; 0 for a new database
	Took  time.Duration
	// Complete is false when the quick check ran out of its budget before the end of
	// the file; FinishCheck then does the rest.
	Complete bool
}

// CorruptError is Open's refusal of a damaged file; errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Path string
	// Findings are what the check found, the first few, one line each.
	Findings []string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("database %s is corrupt: %s", e.Path, strings.Join(e.Findings, "; "))
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == store.ErrCorrupt }

// maxFindings bounds how many problems a check reports: a file with one bad page can
// produce hundreds of lines, and the first few say enough to decide.
const maxFindings = 5

func corrupt(path string, findings []string) error {
	if len(findings) > maxFindings {
		findings = append(findings[:maxFindings:maxFindings], fmt.Sprintf("and %d more", len(findings)-maxFindings))
	}
	return &CorruptError{Path: path, Findings: findings}
}

// sqliteMagic begins every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// header is what the check reads from the first 100 bytes of the file
// (https://sqlite.org/fileformat.html, "The Database Header").
type header struct {
	pageSize  int64
	pages     int64 // the in-header database size; valid only if sizeValid
	sizeValid bool
	freeTrunk uint32 // first freelist trunk page
	freePages uint32 // freelist pages in all
}

// readHeader reads and checks the header, and reports damage as findings.
func readHeader(f *os.File) (header, []string, error) {
	var h header
	b := make([]byte, 100)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return h, nil, err
	}
	if n < 100 {
		return h, []string{fmt.Sprintf("the file is %d bytes, shorter than an SQLite header", n)}, nil
	}
	if !bytes.Equal(b[:16], sqliteMagic) {
		if bytes.Count(b, []byte{0}) == len(b) {
			return h, []string{"its first page is zeros where the SQLite header should be"}, nil
		}
		return h, []string{fmt.Sprintf("it does not begin with the SQLite header (it begins %q)", b[:16])}, nil
	}
	h.pageSize = int64(binary.BigEndian.Uint16(b[16:18]))
	if h.pageSize == 1 {
		h.pageSize = 65536
	}
	if h.pageSize < 512 || h.pageSize&(h.pageSize-1) != 0 {
		return h, []string{fmt.Sprintf("the header gives a page size of %d", h.pageSize)}, nil
	}
	// The in-header size is valid when the change counter matches "version valid for";
	// an older writer that did not keep it up leaves them different.
	h.pages = int64(binary.BigEndian.Uint32(b[28:32]))
	h.sizeValid = h.pages > 0 && binary.BigEndian.Uint32(b[24:28]) == binary.BigEndian.Uint32(b[92:96])
	h.freeTrunk = binary.BigEndian.Uint32(b[32:36])
	h.freePages = binary.BigEndian.Uint32(b[36:40])
	return h, nil, nil
}

// checkHeader reads the file's header.
func checkHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, findings, err := readHeader(f)
	return findings, err
}

// scanFile checks the file itself, without SQLite: the header, that the length is a
// whole number of pages and not shorter than the header says, and that no page in use
// is all zeros. A page of zeros is what a disk or a copy that lost blocks leaves, and
// SQLite only notices it when a statement reads that page, perhaps months later. Every
// page SQLite uses for a table, an index or an overflow chain has non-zero bytes (a
// b-tree page begins with its type; our rows hold text, not blobs of zeros), so a zero
// page is damage unless it is free (freelist leaves keep whatever they held) or the
// lock-byte page at 1 GiB, which SQLite never writes. It reads the file once,
// sequentially, which costs about a second per GB from disk (less from the page cache),
// and stops at deadline (complete is then false). The WAL must have been checkpointed
// into the file first: a page may be newer in the WAL than in the file.
func scanFile(path string, deadline time.Time) (pages int64, findings []string, complete bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, false, err
	}
	defer f.Close()
	h, findings, err := readHeader(f)
	if err != nil || len(findings) > 0 {
		return 0, findings, true, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, false, err
	}
	size := fi.Size()
	pages = size / h.pageSize
	if size%h.pageSize != 0 {
		findings = append(findings, fmt.Sprintf("the file is %d bytes, not a whole number of %d-byte pages (cut short?)", size, h.pageSize))
	}
	if h.sizeValid && h.pages > pages {
		findings = append(findings, fmt.Sprintf("the header counts %d pages but the file holds %d (cut short?)", h.pages, pages))
	}
	if h.sizeValid && h.pages < pages {
		pages = h.pages // pages past the database's end are not part of it
	}

	free, ff := freePages(f, h, pages)
	findings = append(findings, ff...)
	lockByte := int64(1<<30)/h.pageSize + 1

	// Whole megabytes at a time: one read call per page made the scan syscall-bound.
	zero := make([]byte, h.pageSize)
	chunk := make([]byte, max(1<<20/h.pageSize, 1)*h.pageSize)
	var zeros []int64
	complete = true
	for first := int64(1); first <= pages; first += int64(len(chunk)) / h.pageSize {
		if !deadline.IsZero() && time.Now().After(deadline) {
			complete = false
			break
		}
		n := min(int64(len(chunk))/h.pageSize, pages-first+1)
		b := chunk[:n*h.pageSize]
		if _, err := f.ReadAt(b, (first-1)*h.pageSize); err != nil {
			return pages, findings, false, fmt.Errorf("read pages from %d: %w", first, err)
		}
		for i := range n {
			p := first + i
			if p == lockByte || free.has(p) || !bytes.Equal(b[i*h.pageSize:(i+1)*h.pageSize], zero) {
				continue
			}
			zeros = append(zeros, p)
		}
	}
	if len(zeros) > 0 {
		findings = append(findings, fmt.Sprintf("%d pages in use are all zeros: %s of %d", len(zeros), ranges(zeros, 4), pages))
	}
	return pages, findings, complete, nil
}

// pageSet is a set of page numbers.
type pageSet []uint64

func (s pageSet) has(p int64) bool { return p >= 0 && int(p/64) < len(s) && s[p/64]&(1<<(p%64)) != 0 }
func (s pageSet) add(p int64)      { s[p/64] |= 1 << (p % 64) }

// freePages walks the freelist: trunk pages, each listing leaf pages. A list that leaves
// the file or loops is damage.
func freePages(f *os.File, h header, pages int64) (pageSet, []string) {
	free := make(pageSet, pages/64+1)
	trunk := make([]byte, h.pageSize)
	seen := int64(0)
	for t := int64(h.freeTrunk); t != 0; t = int64(binary.BigEndian.Uint32(trunk[:4])) {
		switch {
		case t > pages:
			return free, []string{fmt.Sprintf("the freelist points at page %d, past the end (%d)", t, pages)}
		case free.has(t) || seen > int64(h.freePages):
			return free, []string{"the freelist loops"}
		}
		if _, err := f.ReadAt(trunk, (t-1)*h.pageSize); err != nil {
			return free, []string{fmt.Sprintf("read freelist page %d: %v", t, err)}
		}
		free.add(t)
		seen++
		n := int64(binary.BigEndian.Uint32(trunk[4:8]))
		if n > h.pageSize/4-2 {
			return free, []string{fmt.Sprintf("freelist page %d lists %d pages, more than fit", t, n)}
		}
		for i := range n {
			leaf := int64(binary.BigEndian.Uint32(trunk[8+4*i:]))
			if leaf < 2 || leaf > pages {
				return free, []string{fmt.Sprintf("freelist page %d lists page %d, outside the file", t, leaf)}
			}
			free.add(leaf)
			seen++
		}
	}
	return free, nil
}

// ranges writes sorted page numbers as "3, 7-9", at most max ranges, then "...".
func ranges(ps []int64, max int) string {
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if len(parts) == max {
			parts = append(parts, "...")
			break
		}
		if i == j {
			parts = append(parts, fmt.Sprint(ps[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// checkOpen is Open's check of an existing file (see CheckMode), run on the writer
// before migrations, so that nothing is written into a damaged file.
func (s *Store) checkOpen(ctx context.Context, path string, mode CheckMode, budget time.Duration) (res CheckResult, err error) {
	start := time.Now()
	res = CheckResult{Mode: mode, Complete: true}
	defer func() { res.Took = time.Since(start) }()
	if mode == CheckOff {
		return res, nil
	}
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return res, nil // a new database
	} else if err != nil {
		return res, fmt.Errorf("check %s: %w", path, err)
	}
	var deadline time.Time
	if mode == CheckQuick {
		deadline = start.Add(budget)
	}
	// The header first, before SQLite reads the file: its message for a file that is no
	// database ("file is not a database") names no cause.
	if findings, err := checkHeader(path); err != nil {
		return res, fmt.Errorf("check %s: %w", path, err)
	} else if len(findings) > 0 {
		return res, corrupt(path, findings)
	}
	// Checkpoint (connecting also recovers the WAL after a crash): then the file alone
	// holds the database, and its pages can be read without the WAL. Busy means a reader
	// (sheetq backup) holds an old snapshot; the page scan is then skipped and the SQLite
	// check below still reads through the WAL.
	var busy, logFrames, moved int
	if err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &moved); err != nil {
		if !errors.Is(withFault(err), store.ErrCorrupt) {
			return res, fmt.Errorf("check %s: checkpoint: %w", path, withFault(err))
		}
		// Without a WAL the file is the whole database, and the scan can say what SQLite
		// only calls "malformed".
		findings := []string{err.Error()}
		if fi, serr := os.Stat(path + "-wal"); errors.Is(serr, fs.ErrNotExist) || (serr == nil && fi.Size() == 0) {
			if _, ff, _, serr := scanFile(path, deadline); serr == nil && len(ff) > 0 {
				findings = ff
			}
		}
		return res, corrupt(path, findings)
	}
	if busy == 0 {
		pages, findings, complete, err := scanFile(path, deadline)
		res.Pages, res.Complete = pages, complete
		if err != nil {
			return res, fmt.Errorf("check %s: %w", path, err)
		}
		if len(findings) > 0 {
			return res, corrupt(path, findings)
		}
	}
	pragma, cctx := `PRAGMA integrity_check(20)`, ctx
	if mode == CheckQuick {
		left := time.Until(deadline)
		if left <= 0 {
			res.Complete = false
			return res, nil
		}
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
		pragma = `PRAGMA quick_check(20)`
	}
	findings, err := s.runCheck(cctx, s.w, pragma)
	switch {
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		res.Complete = false // out of budget: FinishCheck does it after start
		return res, nil
	case errors.Is(withFault(err), store.ErrCorrupt):
		return res, corrupt(path, []string{err.Error()})
	case err != nil:
		return res, fmt.Errorf("check %s: %w", path, withFault(err))
	case len(findings) > 0:
		return res, corrupt(path, findings)
	}
	return res, nil
}

// FinishCheck runs the quick check that Open cut short (CheckResult.Complete false) to the
// end, on a read connection beside the running server. Damage it finds is returned and
// kept for WriteHealth, so readiness fails until the file is repaired.
func (s *Store) FinishCheck(ctx context.Context) error {
	findings, err := s.runCheck(ctx, s.r, `PRAGMA quick_check(20)`)
	if err != nil && errors.Is(withFault(err), store.ErrCorrupt) {
		findings, err = []string{err.Error()}, nil
	}
	if err != nil {
		return fmt.Errorf("quick check: %w", err)
	}
	if len(findings) > 0 {
		err := corrupt(s.path, findings)
		s.health.note(err)
		return err
	}
	return nil
}
