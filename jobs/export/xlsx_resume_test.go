package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// crashAt is a source that stops (as a crash would, from the writer's point of view)
// once it has sent rows rows in this attempt, by cancelling the export's context.
type crashAt struct {
	Source
	rows   int64
	cancel context.CancelFunc
}

func (c crashAt) Stream(ctx context.Context, q Query, w RowWriter) error {
	return c.Source.Stream(ctx, q, &countingWriter{RowWriter: w, left: c.rows, cancel: c.cancel})
}

type countingWriter struct {
	RowWriter
	left   int64
	cancel context.CancelFunc
}

func (c *countingWriter) Row(v []any) error {
	if c.left--; c.left < 0 {
		c.cancel()
		return context.Canceled
	}
	return c.RowWriter.Row(v)
}

// resumeRun is one attempt of an export that keeps checkpoints: every `every` rows it
// is asked for one (as the engine asks at each heartbeat), and the last it made is
// returned, with the rows a resumed attempt said it kept.
type resumeRun struct {
	dir, tmp string
	attempt  int
	every    int64
	remote   RemoteFiles // with prefix: where the checkpoints' rows also go
	prefix   string
}

func (r *resumeRun) run(t *testing.T, src Source, q Query, resume []byte, crash int64, maxSheetRows int) (data []byte, last []byte, resumed int64, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r.attempt++
	var rows int64
	resumed = -1
	opt := xlsxOptions{
		tmpDir: r.tmp, maxSheetRows: maxSheetRows, resumeDir: r.dir, attempt: r.attempt, resume: resume,
		progress:       func(n, _ int64) { rows = n },
		wantCheckpoint: func() bool { return rows%r.every == 0 },
		checkpoint:     func(b []byte) { last = append([]byte(nil), b...) },
		resumed:        func(n int64) { resumed = n },
		remote:         r.remote, remotePrefix: r.prefix,
	}
	if crash >= 0 {
		src = crashAt{Source: src, rows: crash, cancel: cancel}
	}
	var buf bytes.Buffer
	err = writeXLSX(ctx, &buf, piped(src, nil, nil), q, opt)
	return buf.Bytes(), last, resumed, err
}

// sameSheets wants the first n sheets of data equal to want's, byte for byte.
func sameSheets(t *testing.T, data, want []byte, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if got, w := sheetXML(t, data, i), sheetXML(t, want, i); got != w {
			t.Fatalf("sheet %d differs from the uninterrupted export's (%d bytes, want %d)", i, len(got), len(w))
		}
	}
}

// decodeCheckpoint reads an xlsx export's checkpoint.
func decodeCheckpoint(t *testing.T, cp []byte) xlsxCheckpoint {
	t.Helper()
	var c xlsxCheckpoint
	if err := json.Unmarshal(cp, &c); err != nil {
		t.Fatalf("checkpoint %s: %v", cp, err)
	}
	return c
}

// An export that crashes and is resumed, once or several times, at any point (before
// its first checkpoint, inside a sheet, at a sheet's end, on the last rows) makes a file
// whose every sheet's XML is the uninterrupted export's, byte for byte: same rows, same
// order, none twice, none missing at a seam. Each resumed attempt continues from the
// last checkpoint's rows.
func TestResumedExportEqualsUninterrupted(t *testing.T) {
	t.Parallel()
	const rows, perSheet = 9000, 2500 // four sheets
	q := demoQuery(rows)
	_, want := exportWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: perSheet})
	sheets := func(data []byte) []string {
		var out []string
		for n := 1; n <= 4; n++ {
			out = append(out, sheetXML(t, data, n))
		}
		return out
	}
	wantSheets := sheets(want)
	for _, tt := range []struct {
		name    string
		crashes []int64 // rows each crashed attempt sends before it stops
		every   int64
	}{
		{"before the first checkpoint", []int64{50}, 1000},
		{"inside the first sheet", []int64{1700}, 1000},
		{"on a sheet's last row", []int64{2499}, 833},
		{"just past a sheet's end", []int64{2501}, 2500},
		{"in a later sheet", []int64{7777}, 1000},
		{"three crashes", []int64{3100, 1500, 2200}, 700},
		{"at the end", []int64{8999}, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: tt.every}
			var cp []byte
			var kept int64
			for i, crash := range tt.crashes {
				_, last, resumed, err := r.run(t, demoSource{}, q, cp, crash, perSheet)
				if !errors.Is(err, context.Canceled) && err == nil {
					t.Fatalf("crash %d: the export finished", i+1)
				}
				if i > 0 && cp != nil && resumed != kept {
					t.Fatalf("crash %d: resumed with %d rows, want the checkpoint's %d", i+1, resumed, kept)
				}
				if last != nil {
					cp, kept = last, decodeCheckpoint(t, last).Rows
				}
				if _, err := os.Stat(r.dir); cp != nil && err != nil {
					t.Fatalf("crash %d: the resume folder is gone: %v", i+1, err)
				}
			}
			data, _, resumed, err := r.run(t, demoSource{}, q, cp, -1, perSheet)
			if err != nil {
				t.Fatal(err)
			}
			if cp != nil && resumed != kept {
				t.Fatalf("the last attempt resumed with %d rows, want the checkpoint's %d", resumed, kept)
			}
			if cp == nil && resumed != -1 {
				t.Fatalf("resumed with %d rows without a checkpoint", resumed)
			}
			for i, got := range sheets(data) {
				if got != wantSheets[i] {
					t.Fatalf("sheet %d differs from the uninterrupted export's (%d bytes, want %d)", i+1, len(got), len(wantSheets[i]))
				}
			}
			if _, err := os.Stat(r.dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the resume folder is left after the export succeeded: %v", err)
			}
		})
	}
}

// A checkpoint whose files are damaged or gone is not continued from: the export starts
// from the first row and still makes the whole file.
func TestDamagedCheckpointStartsOver(t *testing.T) {
	t.Parallel()
	const rows, perSheet = 6000, 4000
	q := demoQuery(rows)
	_, want := exportWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: perSheet})
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string, cp xlsxCheckpoint)
	}{
		{"truncated", func(t *testing.T, dir string, cp xlsxCheckpoint) {
			m := cp.Sheets[len(cp.Sheets)-1]
			if err := os.Truncate(filepath.Join(dir, m.File), m.Comp-10); err != nil {
				t.Fatal(err)
			}
		}},
		{"flipped", func(t *testing.T, dir string, cp xlsxCheckpoint) {
			m := cp.Sheets[0]
			p := filepath.Join(dir, m.File)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x55
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, dir string, cp xlsxCheckpoint) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 1000}
			_, cp, _, _ := r.run(t, demoSource{}, q, nil, 5500, perSheet)
			c := decodeCheckpoint(t, cp)
			if len(c.Sheets) != 2 {
				t.Fatalf("checkpoint %s: %d sheets, want 2", cp, len(c.Sheets))
			}
			tt.damage(t, r.dir, c)
			data, _, resumed, err := r.run(t, demoSource{}, q, cp, -1, perSheet)
			if err != nil {
				t.Fatal(err)
			}
			if resumed != -1 {
				t.Fatalf("resumed with %d rows from damaged files", resumed)
			}
			sameSheets(t, data, want, 2)
		})
	}
}

// A source that cannot resume is never asked to: no checkpoint is made.
func TestNoCheckpointWithoutAPlacer(t *testing.T) {
	t.Parallel()
	src := sliceSource{cols: []Column{{Name: "n", Type: TypeInt}}, total: -1}
	for i := range 500 {
		src.rows = append(src.rows, []any{int64(i)})
	}
	r := &resumeRun{dir: filepath.Join(t.TempDir(), "job"), tmp: t.TempDir(), every: 10}
	_, last, _, err := r.run(t, src, Query{Report: Report{ID: "r", Sheet: "S"}}, nil, -1, 0)
	if err != nil || last != nil {
		t.Fatalf("export = %v, checkpoint %s; want none", err, last)
	}
	if !slices.Contains([]int{0}, len(last)) {
		t.Fatal("unreachable")
	}
}

// An export that ends before its first checkpoint, as most do, never makes a resume
// folder: its rows files are temporary files until a checkpoint moves them.
func TestNoResumeFolderWithoutACheckpoint(t *testing.T) {
	t.Parallel()
	r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 1 << 40}
	if _, last, _, err := r.run(t, demoSource{}, demoQuery(20_000), nil, -1, 0); err != nil || last != nil {
		t.Fatalf("export = %v, checkpoint %s", err, last)
	}
	if _, err := os.Stat(filepath.Dir(r.dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the resume folder was made: %v", err)
	}
	// One that fails before its first checkpoint leaves nothing either.
	if _, _, _, err := r.run(t, demoSource{}, demoQuery(20_000), nil, 15_000, 0); err == nil {
		t.Fatal("the export finished")
	}
	if _, err := os.Stat(filepath.Dir(r.dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the resume folder was made: %v", err)
	}
	if left, _ := os.ReadDir(r.tmp); len(left) != 0 {
		t.Fatalf("files left in the spill folder: %v", left)
	}
}
