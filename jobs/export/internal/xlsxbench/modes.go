package main

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// benchReport is the report every pipeline run exports.
func benchReport(query string) export.Report {
	return export.Report{ID: "bench", Title: "Benchmark orders", Source: "bench", Sheet: "Orders", Query: query}
}

// library serves the one benchmark report.
type library struct{ rep export.Report }

func (l library) Report(id string) (export.Report, error) {
	if id != l.rep.ID {
		return export.Report{}, fmt.Errorf("%w %q", export.ErrUnknownReport, id)
	}
	return l.rep, nil
}

// runPipeline enqueues one export job in a fresh store and waits for the engine to
// finish it: the query runs, the file (xlsx or csv, as format says) is written to the
// part file, fsynced, renamed and hashed, and the job is committed SUCCEEDED. The
// process collects garbage as the server does by default (gcdefaults, with the default
// two export workers), so that its peak RSS is the server's as shipped.
//
// With resume, the report has "-- resume: id" and the engine's heartbeat is a second, so
// the export makes a checkpoint every second (five times as often as the server's
// default heartbeat of 5 s): what checkpoints cost.
func runPipeline(ctx context.Context, dir, db, query, format string, resume bool) (result, error) {
	st, err := sqlite.Open(ctx, filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	changed := make(chan struct{}, 1)
	var heartbeat time.Duration
	rep := benchReport(query)
	if resume {
		heartbeat, rep.Resume = time.Second, "id"
	}
	eng := jobs.New(st, jobs.Config{
		Heartbeat:  heartbeat,
		Workers:    1,
		TmpDir:     filepath.Join(dir, "tmp"),
		ExportsDir: filepath.Join(dir, "exports"),
		Logger:     slog.New(slog.DiscardHandler),
		OnChange: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	src, closeSrc, err := newSource(db)
	if err != nil {
		return result{}, err
	}
	defer closeSrc()
	kind := export.New(export.Config{
		TmpDir:  filepath.Join(dir, "spill"),
		Library: library{rep},
		Sources: map[string]export.Source{"bench": src},
	})
	eng.Register(export.Name, kind)
	args, err := kind.Validate("bench", nil)
	if err == nil {
		args, err = args.WithFile(export.FileOptions{Format: format})
	}
	if err != nil {
		return result{}, err
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return result{}, err
	}
	if err := eng.Start(ctx); err != nil {
		return result{}, err
	}
	defer eng.Stop()
	j, _, err := eng.Enqueue(ctx, store.NewJob{Kind: export.Name, Args: raw, MaxAttempts: 1})
	if err != nil {
		return result{}, err
	}
	for !j.Status.Final() {
		select {
		case <-changed:
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
		if j, err = st.Get(ctx, j.ID); err != nil {
			return result{}, err
		}
	}
	if j.Status != store.StatusSucceeded {
		return result{}, fmt.Errorf("job %s: %s: %s", j.Status, j.ErrorCode, j.ErrorMessage)
	}
	path := jobs.FilePath(filepath.Join(dir, "exports"), j.FileName)
	if fi, err := os.Stat(path); err != nil || fi.Size() != j.FileSize {
		return result{}, fmt.Errorf("published file: %v (size %d recorded)", err, j.FileSize)
	}
	return result{Rows: j.ProgressRows, Bytes: j.FileSize, path: path}, nil
}

// bareWriter is the least a StreamWriter needs to write the rows as the export does:
// typed cells, dates styled, integers beyond 2^53 as text, a header on each sheet and a
// new sheet at Excel's row limit. No widths, frozen panes, filters or cell-limit checks.
type bareWriter struct {
	f                    *excelize.File
	cols                 []export.Column
	sw                   *excelize.StreamWriter
	sheets, row          int
	rows                 int64
	dateStyle, timeStyle int
	cells                []any
	timeCells            []excelize.Cell
}

func (b *bareWriter) Begin(cols []export.Column, _ int64) error {
	b.cols = cols
	b.cells = make([]any, len(cols))
	b.timeCells = make([]excelize.Cell, len(cols))
	var err error
	if b.dateStyle, err = b.f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd")}); err != nil {
		return err
	}
	b.timeStyle, err = b.f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd hh:mm:ss")})
	return err
}

func (b *bareWriter) nextSheet() error {
	if b.sw != nil {
		if err := b.sw.Flush(); err != nil {
			return err
		}
	}
	b.sheets++
	name := "Orders"
	var err error
	if b.sheets == 1 {
		err = b.f.SetSheetName("Sheet1", name)
	} else {
		name = fmt.Sprintf("Orders (%d)", b.sheets)
		_, err = b.f.NewSheet(name)
	}
	if err != nil {
		return err
	}
	if b.sw, err = b.f.NewStreamWriter(name); err != nil {
		return err
	}
	header := make([]any, len(b.cols))
	for i, c := range b.cols {
		header[i] = c.Name
	}
	b.row = 1
	return b.sw.SetRow("A1", header)
}

func (b *bareWriter) Row(vals []any) error {
	if b.sw == nil || b.row >= excelize.TotalRows {
		if err := b.nextSheet(); err != nil {
			return err
		}
	}
	for i, v := range vals {
		switch t := v.(type) {
		case time.Time:
			style := b.timeStyle
			if b.cols[i].Type == export.TypeDate {
				style = b.dateStyle
			}
			b.timeCells[i] = excelize.Cell{StyleID: style, Value: v}
			b.cells[i] = &b.timeCells[i]
		case int64:
			if t > 1<<53 || t < -1<<53 {
				b.cells[i] = strconv.FormatInt(t, 10)
			} else {
				b.cells[i] = v
			}
		default:
			b.cells[i] = v
		}
	}
	b.row++
	b.rows++
	return b.sw.SetRow("A"+strconv.Itoa(b.row), b.cells)
}

// runExcelize writes the rows with a bare StreamWriter. Without direct it saves with
// File.Write, which builds the zip in memory; with direct, SetZipWriter hands excelize
// a zip writer over the file.
func runExcelize(ctx context.Context, dir, db, query string, direct bool) (result, error) {
	f := excelize.NewFile(excelize.Options{TmpDir: dir})
	defer f.Close()
	w := &bareWriter{f: f}
	if err := stream(ctx, db, query, w); err != nil {
		return result{}, err
	}
	if err := w.sw.Flush(); err != nil {
		return result{}, err
	}
	out, err := os.Create(filepath.Join(dir, "out.xlsx"))
	if err != nil {
		return result{}, err
	}
	defer out.Close()
	if direct {
		bw := bufio.NewWriterSize(out, 64<<10)
		zw := zip.NewWriter(bw)
		f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return zw })
		buf, err := f.WriteToBuffer()
		if err != nil {
			return result{}, err
		}
		if buf.Len() > 0 {
			return result{}, fmt.Errorf("excelize buffered %d bytes", buf.Len())
		}
		if err := bw.Flush(); err != nil {
			return result{}, err
		}
	} else if err := f.Write(out); err != nil {
		return result{}, err
	}
	return finishFile(out, w.rows)
}

// runCSV writes the rows with encoding/csv.
func runCSV(ctx context.Context, dir, db, query string) (result, error) {
	out, err := os.Create(filepath.Join(dir, "out.csv"))
	if err != nil {
		return result{}, err
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 64<<10)
	w := &csvWriter{w: csv.NewWriter(bw)}
	if err := stream(ctx, db, query, w); err != nil {
		return result{}, err
	}
	if w.w.Flush(); w.w.Error() != nil {
		return result{}, w.w.Error()
	}
	if err := bw.Flush(); err != nil {
		return result{}, err
	}
	return finishFile(out, w.rows)
}

type csvWriter struct {
	w      *csv.Writer
	cols   []export.Column
	record []string
	rows   int64
}

func (c *csvWriter) Begin(cols []export.Column, _ int64) error {
	c.cols = cols
	c.record = make([]string, len(cols))
	for i, col := range cols {
		c.record[i] = col.Name
	}
	return c.w.Write(c.record)
}

func (c *csvWriter) Row(vals []any) error {
	for i, v := range vals {
		switch t := v.(type) {
		case nil:
			c.record[i] = ""
		case int64:
			c.record[i] = strconv.FormatInt(t, 10)
		case float64:
			c.record[i] = strconv.FormatFloat(t, 'g', -1, 64)
		case bool:
			c.record[i] = strconv.FormatBool(t)
		case string:
			c.record[i] = t
		case time.Time:
			if c.cols[i].Type == export.TypeDate {
				c.record[i] = t.Format("2006-01-02")
			} else {
				c.record[i] = t.Format("2006-01-02 15:04:05")
			}
		default:
			c.record[i] = fmt.Sprint(t)
		}
	}
	c.rows++
	return c.w.Write(c.record)
}

// stream runs the benchmark query through the SQLite source into w.
func stream(ctx context.Context, db, query string, w export.RowWriter) error {
	src, closeSrc, err := newSource(db)
	if err != nil {
		return err
	}
	defer closeSrc()
	return src.Stream(ctx, export.Query{Report: benchReport(query)}, w)
}

// finishFile fsyncs the output, as the engine does with a part file, and reports it.
func finishFile(out *os.File, rows int64) (result, error) {
	if err := out.Sync(); err != nil {
		return result{}, err
	}
	fi, err := out.Stat()
	if err != nil {
		return result{}, err
	}
	return result{Rows: rows, Bytes: fi.Size(), path: out.Name()}, nil
}

func ptr[T any](v T) *T { return &v }
