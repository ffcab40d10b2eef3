// Package export is the export job kind: it runs a report's query on its source and
// streams the rows into an .xlsx file.
package export

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"sheetq/jobs"
)

// Name is the job kind this package registers.
const Name = "export"

// Args is the JSON stored in a job's args.
type Args struct {
	Report string         `json:"report"`
	Params map[string]any `json:"params"`
}

// Config configures the export kind.
type Config struct {
	// TmpDir is where the xlsx writer spills large sheets before the file is assembled;
	// empty means the system's temporary directory.
	TmpDir string
}

// Report is a named, parameterised query over one source, written to one sheet.
type Report struct {
	ID     string
	Title  string
	Source string // name of the Source that runs it
	Sheet  string // base name of the sheet(s) the rows go to
	Params []Param
	Query  string // the source's query text; built-in reports leave it empty
}

// ReportInfo describes a report for listing (GET /api/v1/reports).
type ReportInfo struct {
	ID     string  `json:"id"`
	Title  string  `json:"title"`
	Params []Param `json:"params"`
}

// Kind runs exports.
type Kind struct {
	cfg     Config
	reports map[string]Report
	sources map[string]Source
}

// New returns the export kind with the built-in demo report and source.
func New(cfg Config) *Kind {
	return &Kind{
		cfg:     cfg,
		reports: map[string]Report{demoReport.ID: demoReport},
		sources: map[string]Source{demoReport.Source: demoSource{}},
	}
}

// Reports lists the known reports, sorted by id.
func (k *Kind) Reports() []ReportInfo {
	out := make([]ReportInfo, 0, len(k.reports))
	for _, id := range slices.Sorted(maps.Keys(k.reports)) {
		r := k.reports[id]
		out = append(out, ReportInfo{ID: r.ID, Title: cmp.Or(r.Title, r.ID), Params: append([]Param{}, r.Params...)})
	}
	return out
}

// Validate checks a request before a job is accepted and returns the args to store:
// every declared parameter, defaults applied, in canonical form. Errors wrap
// ErrUnknownReport or are a *ParamError.
func (k *Kind) Validate(report string, params map[string]any) (Args, error) {
	rep, err := k.report(report)
	if err != nil {
		return Args{}, err
	}
	canon, err := validateParams(rep.Params, params)
	if err != nil {
		return Args{}, err
	}
	return Args{Report: rep.ID, Params: canon}, nil
}

// Run implements jobs.Handler.
func (k *Kind) Run(ctx context.Context, run *jobs.Run) error {
	var a Args
	dec := json.NewDecoder(bytes.NewReader(run.Args))
	dec.UseNumber() // keep large ints exact until validation converts them
	if err := dec.Decode(&a); err != nil {
		return jobs.Permanent("bad_args", fmt.Errorf("decode export args: %w", err))
	}
	rep, err := k.report(a.Report)
	if err != nil {
		return jobs.Permanent("unknown_report", err)
	}
	// Stored args were valid when accepted, but the report may have changed since.
	params, err := validateParams(rep.Params, a.Params)
	if err != nil {
		return jobs.Permanent("bad_params", err)
	}
	src, ok := k.sources[rep.Source]
	if !ok {
		return jobs.Permanentf("unknown_source", "report %q: unknown source %q", rep.ID, rep.Source)
	}
	q := Query{Report: rep, Params: params, Attempt: run.Attempt}
	// The part file is created on the first byte, so an attempt that fails before
	// producing anything (an upstream error, a cancel) leaves no file behind.
	out := &lazyWriter{open: run.Output}
	return writeXLSX(ctx, out, k.cfg.TmpDir, src, q, run.Progress)
}

func (k *Kind) report(id string) (Report, error) {
	rep, ok := k.reports[id]
	if !ok {
		return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
	}
	return rep, nil
}

// lazyWriter opens its destination on the first write.
type lazyWriter struct {
	open func() (io.Writer, error)
	w    io.Writer
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.w == nil {
		w, err := l.open()
		if err != nil {
			return 0, err
		}
		l.w = w
	}
	return l.w.Write(p)
}
