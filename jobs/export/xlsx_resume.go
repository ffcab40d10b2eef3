package export

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/klauspost/compress/flate"

	"sheetq/jobs"
)

// xlsxCheckpoint is what an xlsx export records at a checkpoint (jobs.Run.Checkpoint):
// how far its file got (the rows, the fixed parts of the sheets' frames, and a mark per
// sheet's rows file) and how far its source got (Source, the Placer's token). Its
// files are in the job's resume folder (xlsxOptions.resumeDir).
type xlsxCheckpoint struct {
	Format int             `json:"format"` // xlsxCheckpointFormat
	Rows   int64           `json:"rows"`
	Cols   []Column        `json:"cols"`
	Widths []float64       `json:"widths"`
	Cut    []int64         `json:"cut"`
	Sheets []sheetMark     `json:"sheets"` // the finished sheets, then the current one
	Source json.RawMessage `json:"source,omitempty"`
}

// xlsxCheckpointFormat changes whenever a checkpoint's meaning does: an attempt that
// finds another starts from the first row.
const xlsxCheckpointFormat = 1

// checkpoints reports whether the export keeps checkpoints: its source can resume its
// report and it has a folder for them.
func (o xlsxOptions) checkpoints() bool { return o.resumeDir != "" }

// resumePath is the rows file of sheet n. Its name is the same for every attempt: an
// attempt that resumes continues the file the checkpoint names, cut back to the mark,
// and an attempt without one creates it anew.
func (o xlsxOptions) resumePath(n int) string {
	return filepath.Join(o.resumeDir, "sheet"+strconv.Itoa(n)+".z")
}

// checkpoint makes the file so far durable and hands the engine a checkpoint of it.
// Before the first sheet starts (the first widthSample rows) there is nothing to keep.
func (x *xlsxWriter) checkpoint() error {
	if x.cur == nil || x.placer == nil {
		return nil
	}
	token, err := x.placer(x.rows, x.last)
	if err != nil {
		// The source cannot say where it is: no checkpoint this time.
		slog.Default().Warn("export: no checkpoint: the source cannot place its rows", "rows", x.rows, "err", err)
		return nil
	}
	if !x.inResume {
		if err := x.moveToResume(); err != nil {
			return err
		}
	}
	mark, err := x.cur.sync()
	if err != nil {
		return err
	}
	cp := xlsxCheckpoint{Format: xlsxCheckpointFormat, Rows: x.rows, Cols: x.cols, Widths: x.widths, Cut: x.cut, Source: token}
	for _, p := range x.parts {
		cp.Sheets = append(cp.Sheets, sheetMark{File: filepath.Base(p.file.Name()), Comp: p.rowsComp, Raw: p.rowsRaw, CRC: p.rowsCRC, Rows: p.rows})
	}
	if x.opt.remote != nil {
		mark.Pieces = x.upload(len(x.parts)+1, x.cur.file, mark.Comp, &x.cur.pieces)
		for i := range cp.Sheets {
			p := x.parts[i]
			cp.Sheets[i].Pieces = x.upload(i+1, p.file, p.rowsComp, &p.pieces)
		}
	}
	cp.Sheets = append(cp.Sheets, mark)
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	x.opt.checkpoint(data)
	return nil
}

// restore continues from the checkpoint in data, if there is one and its files are
// whole: each sheet's rows file is checked against its mark (size and checksum of what
// its first Comp bytes inflate to) and cut back to it, dropping what an attempt wrote
// after its last checkpoint, and the current sheet continues from there with the
// dictionary read back from it. An abandoned attempt of this process cannot write to
// the files any more: its writes fail once its context is done (ctxWriter). It returns
// where the source continues, or nil to start from the first row (no checkpoint,
// another format, a missing or damaged file: said in the log).
func (x *xlsxWriter) restore(data []byte) *Position {
	if len(data) == 0 {
		return nil
	}
	var cp xlsxCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil || cp.Format != xlsxCheckpointFormat || len(cp.Sheets) == 0 || len(cp.Cols) == 0 ||
		len(cp.Widths) != len(cp.Cols) || len(cp.Cut) != len(cp.Cols) {
		slog.Default().Warn("export: checkpoint not usable; starting from the first row", "format", cp.Format, "err", err)
		return nil
	}
	if err := x.restoreFiles(cp); err != nil {
		slog.Default().Warn("export: checkpoint's files not usable; starting from the first row", "rows", cp.Rows, "err", err)
		x.dropRestored()
		return nil
	}
	if err := x.setColumns(cp.Cols); err != nil {
		slog.Default().Warn("export: checkpoint's columns not usable; starting from the first row", "err", err)
		x.dropRestored()
		return nil
	}
	x.rows, x.widths, x.cut, x.started = cp.Rows, cp.Widths, cp.Cut, true
	x.restored, x.inResume = &cp, true
	if x.opt.keeping != nil {
		x.opt.keeping()
	}
	return &Position{Rows: cp.Rows, Token: cp.Source}
}

// moveToResume moves the rows files, temporary until the first checkpoint, into the
// job's resume folder under their sheets' names, where the next attempt finds them.
// Each is opened again at its new name, at the same place, so that their writers go on.
func (x *xlsxWriter) moveToResume() error {
	if err := os.MkdirAll(x.opt.resumeDir, 0o700); err != nil {
		return x.ioErr("resume folder", err)
	}
	move := func(n int, f *os.File) (*os.File, error) {
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		path := x.opt.resumePath(n)
		if err := os.Rename(f.Name(), path); err != nil {
			return nil, err
		}
		g, err := os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			_, err = g.Seek(off, io.SeekStart)
		}
		if err != nil {
			if g != nil {
				g.Close()
			}
			os.Rename(path, f.Name()) // back where close removes it
			return nil, err
		}
		f.Close()
		return g, nil
	}
	for i, p := range x.parts {
		g, err := move(i+1, p.file)
		if err != nil {
			return x.ioErr("resume folder", err)
		}
		p.file = g
	}
	if err := x.cur.bw.Flush(); err != nil {
		return x.ioErr("write rows", err)
	}
	g, err := move(len(x.parts)+1, x.cur.file)
	if err != nil {
		return x.ioErr("resume folder", err)
	}
	x.cur.file, x.cur.cw.w = g, g
	x.inResume = true
	if x.opt.keeping != nil {
		x.opt.keeping()
	}
	return nil
}

// restoreFiles opens the checkpoint's rows files, checked and cut back to their marks.
func (x *xlsxWriter) restoreFiles(cp xlsxCheckpoint) error {
	for i, m := range cp.Sheets {
		if m.File != filepath.Base(x.opt.resumePath(i+1)) || m.Comp < 0 || m.Raw < 0 || m.Rows < 1 || m.Rows > x.opt.maxSheetRows {
			return fmt.Errorf("sheet %d: a mark out of range", i+1)
		}
		f, dict, err := x.openRows(i+1, m)
		if err != nil {
			return fmt.Errorf("sheet %d: %w", i+1, err)
		}
		if i < len(cp.Sheets)-1 {
			x.parts = append(x.parts, &sheetPart{
				name: sheetName(x.base, i+1), ref: "A1:" + colName(len(cp.Cols)) + strconv.Itoa(m.Rows),
				file: f, rowsComp: m.Comp, rowsRaw: m.Raw, rowsCRC: m.CRC, rows: m.Rows, first: i == 0, done: true,
				pieces: m.Pieces,
			})
			continue
		}
		x.cur = x.newSheetRows(f, m.Comp, dict, m.CRC, m.Raw, m.Rows)
		x.cur.pieces = m.Pieces
	}
	return nil
}

// dropRestored forgets what restoreFiles opened, so that the export starts from the
// first row (prepare creates the files anew).
func (x *xlsxWriter) dropRestored() {
	x.inResume = false
	if x.cur != nil {
		x.cur.abandon()
		x.cur.file.Close()
		x.cur = nil
	}
	for _, p := range x.parts {
		p.file.Close()
	}
	x.parts = nil
}

// checkRows checks that f's first m.Comp bytes inflate to m.Raw bytes with checksum
// m.CRC, and returns their last 32 KiB, the dictionary the next block starts from.
func checkRows(f *os.File, m sheetMark) ([]byte, error) {
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() < m.Comp {
		return nil, fmt.Errorf("%s holds %d bytes, fewer than the checkpoint's %d", m.File, st.Size(), m.Comp)
	}
	fr := flate.NewReader(bufio.NewReaderSize(io.NewSectionReader(f, 0, m.Comp), 256<<10))
	defer fr.Close()
	tail := &tailWriter{}
	if n, err := io.CopyN(tail, fr, m.Raw); err != nil {
		return nil, fmt.Errorf("%s inflates to %d bytes, fewer than the checkpoint's %d: %w", m.File, n, m.Raw, err)
	}
	if n, _ := fr.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("%s inflates to more than the checkpoint's %d bytes", m.File, m.Raw)
	}
	if tail.crc != m.CRC {
		return nil, fmt.Errorf("%s: checksum %08x, the checkpoint's %08x", m.File, tail.crc, m.CRC)
	}
	return tail.window, nil
}

// tailWriter checksums what it is given and keeps its last deflateWindow bytes.
type tailWriter struct {
	crc    uint32
	window []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.crc = crc32.Update(t.crc, crc32.IEEETable, p)
	t.window = window(t.window, p)
	return len(p), nil
}

// permanent reports whether err fails the job for good.
func permanent(err error) bool {
	var je *jobs.Error
	return errors.As(err, &je) && je.Permanent
}
