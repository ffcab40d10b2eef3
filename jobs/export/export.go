// Package export is the export job kind: it runs a report's query on its source and
// streams the rows into an .xlsx or a .csv file.
//
// The .xlsx file's data rows are written as sheet XML by the package itself
// (xlsx_cells.go), straight into pooled buffers that are deflated on every core into a
// rows file per sheet (xlsx_sheet.go, deflate.go); excelize makes the rest: the styles,
// each sheet's frame (columns, panes, the header row, the autofilter) and the package
// parts (xlsx.go). See ARCHITECTURE.md, "Checkpoints and resume", for how a sheet is
// framed and checkpointed.
package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sheetq/jobs"
	"sheetq/store"
)

// Name is the job kind this package registers.
const Name = "export"

// Args is the JSON stored in a job's args.
type Args struct {
	Report string         `json:"report"`
	Params map[string]any `json:"params"`
	// Format is the file's format: FormatCSV, or "" for xlsx (Args.WithFile).
	Format string `json:"format,omitempty"`
	// BOM starts a csv file with a UTF-8 byte order mark, for Excel.
	BOM bool `json:"bom,omitempty"`
	// CSVFormulas is what a csv file does with a text field that a spreadsheet would
	// run as a formula (one starting with = + - @, a tab or a CR): "" (CSVNeutralise,
	// the default) writes it with a leading ', CSVKeep as it is (Args.WithFile). A
	// schedule's exports are always neutralised.
	CSVFormulas string `json:"csv_formulas,omitempty"`
	// Spec is the report as it was when the job was accepted, so that editing or
	// removing its file never changes a queued or running job.
	Spec *Report `json:"spec,omitempty"`
	// ScheduleID and ScheduledFor are set on a schedule's firing (issue 20): which
	// schedule made the export, and for which time. Deliver is where the schedule sends
	// the file, frozen at the firing (a list of jobs/deliver targets); nil: nowhere.
	ScheduleID   string          `json:"schedule_id,omitempty"`
	ScheduledFor *time.Time      `json:"scheduled_for,omitempty"`
	Deliver      json.RawMessage `json:"deliver,omitempty"`
	// TimeZone is the schedule's IANA zone, so that a delivery says the time it was for
	// at the schedule's wall time ("06:00 Europe/Berlin").
	TimeZone string `json:"timezone,omitempty"`
	// Refused is why the export may not run: a schedule's firing for an owner who may no
	// longer run the report (or lacks an attribute it takes). The export fails with it at
	// once, where people look, instead of running with what the owner may not see.
	Refused string `json:"refused,omitempty"`
}

// Queue is the queue the export runs in, from the report as accepted: "" for the
// exports lane (store.DefaultQueue).
func (a Args) Queue() string {
	if a.Spec == nil {
		return ""
	}
	return a.Spec.Queue
}

// Config configures the export kind.
type Config struct {
	// TmpDir is where the xlsx writer spills large sheets before the file is assembled;
	// empty means the system's temporary directory.
	TmpDir string
	// Library finds reports by id; nil means only the built-in demo report.
	Library Library
	// Sources maps source names to sources; the built-in "demo" source is always present.
	Sources map[string]Source
	// Now is the clock an export's file is stamped with; nil means time.Now.
	Now func() time.Time
	// Version is sheetq's version, which an xlsx file names with its application
	// (docProps/app.xml); empty: the name alone.
	Version string
	// Remote is a bucket the nodes share, where an export's checkpoints keep their rows
	// so that an attempt on another node continues it; nil: this node only.
	Remote RemoteFiles
}

// ErrUnknownSource is returned when a report names a source that is not configured.
var ErrUnknownSource = errors.New("unknown source")

// Library finds reports by id: the watched reports folder and the built-ins. Report
// returns an error wrapping ErrUnknownReport for an id it does not know, and the load
// error for a report whose file is broken.
type Library interface {
	Report(id string) (Report, error)
}

// Report is a named, parameterised query over one source, written to one sheet.
type Report struct {
	ID string `json:"id"`
	// Access are the groups whose members may see and run the report ("-- access:
	// sales, finance"); nil: everyone signed in, or admins only ([access] default).
	Access []string `json:"access,omitempty"`
	Title  string   `json:"title"`
	// Description is free text from the report file's description lines.
	Description string  `json:"description,omitempty"`
	Source      string  `json:"source"` // name of the Source that runs it
	Sheet       string  `json:"sheet"`  // base name of the sheet(s) the rows go to
	Params      []Param `json:"params"`
	Query       string  `json:"query,omitempty"` // the source's query text; built-in reports leave it empty
	// Count asks the source to count the rows first, so progress has a total.
	Count bool `json:"count,omitempty"`
	// Queue is the queue (lane) the report's exports run in ("-- queue: NAME"); empty:
	// the exports lane (store.DefaultQueue).
	Queue string `json:"queue,omitempty"`
	// Columns are the report's column lines: each column's label, type and number
	// format ("-- column: NAME "Label" TYPE(FORMAT)"), applied by withColumns.
	Columns []ColumnSpec `json:"columns,omitempty"`
	// Resume names the unique column the query orders its rows by ("-- resume: id"), so
	// that an interrupted export continues after the last value written instead of
	// starting again (sqlsource.go, ARCHITECTURE.md "Checkpoints and resume").
	Resume string `json:"resume,omitempty"`
	// Filename is the download name's pattern ("-- filename: orders-{from}-{to}"),
	// without the extension; empty: <report>-<day>-<short id> (DownloadName).
	Filename string `json:"filename,omitempty"`
	// File names the file the report was loaded from, as reports/orders.sql (not the
	// server's absolute path); empty for built-ins.
	File string `json:"file,omitempty"`
	// Request, Rows and Paginate are an HTTP report's lines as written ("-- request:
	// GET orders?from={from}", "-- rows: .data[]", "-- paginate: link"), which an http
	// source reads (httpsource_spec.go); such a report has no Query.
	Request  string `json:"request,omitempty"`
	Rows     string `json:"rows,omitempty"`
	Paginate string `json:"paginate,omitempty"`
	// Encrypt requires a password for the report's files ("-- encrypt: required"):
	// they are served and delivered only encrypted (internal/officecrypt), and only as
	// xlsx, since a csv file cannot be.
	Encrypt bool `json:"encrypt,omitempty"`
}

// EncryptRequired says whether the export's file may leave the server only encrypted:
// its report, as accepted, says "-- encrypt: required".
func (a Args) EncryptRequired() bool { return a.Spec != nil && a.Spec.Encrypt }

// Kind runs exports.
type Kind struct {
	cfg     Config
	sources map[string]Source
	// resuming holds the ids of the jobs whose exports made a checkpoint in this
	// process: the ones Ended has files to look for.
	resuming sync.Map
}

// Builtin returns the reports compiled into sheetq (the demo report).
func Builtin() []Report { return []Report{demoReport} }

// New returns the export kind over cfg's library and sources plus the built-in demo.
func New(cfg Config) *Kind {
	sources := map[string]Source{demoReport.Source: demoSource{}}
	for name, src := range cfg.Sources {
		sources[name] = src
	}
	return &Kind{cfg: cfg, sources: sources}
}

// Validate checks a request before a job is accepted and returns the args to store:
// every declared parameter, defaults applied, in canonical form. Errors wrap
// ErrUnknownReport or are a *ParamError.
func (k *Kind) Validate(report string, params map[string]any) (Args, error) {
	return k.ValidateAs(report, params, nil)
}

// AttrFunc looks up an attribute of whoever runs a report, for its from=person.<attr>
// parameters; nil has none.
type AttrFunc func(name string) (string, bool)

// AttrError is a report's from=person.<Attr> parameter that the person running it has no
// value for: they cannot run the report.
type AttrError struct {
	Report, Param, Attr string
}

func (e *AttrError) Error() string {
	return fmt.Sprintf("report %q takes parameter %q from your account's attribute %q, which your account does not have; ask an admin to set it",
		e.Report, e.Param, e.Attr)
}

// ValidateAs is Validate for someone whose attributes attr looks up: each from=person.<attr>
// parameter takes that attribute's value, and a request that gives one is a *ParamError.
// A missing attribute is an *AttrError.
func (k *Kind) ValidateAs(report string, params map[string]any, attr AttrFunc) (Args, error) {
	rep, err := k.report(report)
	if err != nil {
		return Args{}, err
	}
	src, ok := k.sources[rep.Source]
	if !ok {
		return Args{}, fmt.Errorf("%w: report %q uses source %q, which the config file does not name",
			ErrUnknownSource, rep.ID, rep.Source)
	}
	// An HTTP report (-- request:) runs on an http source only, and SQL on the others:
	// either mismatch would fail every run.
	if _, isHTTP := src.(*httpSource); isHTTP != (rep.Request != "") {
		if isHTTP {
			return Args{}, fmt.Errorf("report %q has SQL, but its source %q is an http source, which needs \"-- request: GET <path>\" lines instead", rep.ID, rep.Source)
		}
		return Args{}, fmt.Errorf("report %q is an HTTP report (-- request:), but its source %q is not an http source", rep.ID, rep.Source)
	}
	if params, err = bindAttrs(rep, params, attr); err != nil {
		return Args{}, err
	}
	canon, err := validateParams(rep.Params, params)
	if err != nil {
		return Args{}, err
	}
	return Args{Report: rep.ID, Params: canon, Spec: &rep}, nil
}

// Run implements jobs.Handler.
func (k *Kind) Run(ctx context.Context, run *jobs.Run) error {
	var (
		a   Args
		err error
	)
	dec := json.NewDecoder(bytes.NewReader(run.Args))
	dec.UseNumber() // keep large ints exact until validation converts them
	if err = dec.Decode(&a); err != nil {
		return jobs.Permanent("bad_args", fmt.Errorf("decode export args: %w", err))
	}
	if a.Refused != "" {
		return jobs.Permanentf("forbidden", "%s", a.Refused)
	}
	var rep Report
	if a.Spec != nil {
		rep = *a.Spec
	} else if rep, err = k.report(a.Report); err != nil {
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
	resumable, _ := k.Resumable(rep)
	resumable = resumable && k.cfg.TmpDir != "" && a.Format == ""
	var want <-chan struct{}
	if resumable {
		want = run.CheckpointWanted()
	}
	src = piped(withColumns(src, rep.Columns, run.Warn), run.Go, want)
	now := k.cfg.Now
	if now == nil {
		now = time.Now
	}
	q := Query{Report: rep, Params: params, Attempt: run.Attempt, Time: now(), Warn: run.Warn}
	// The part file is created on the first byte, so an attempt that fails before
	// producing anything (an upstream error, a cancel) leaves no file behind.
	out := &lazyWriter{open: run.Output}
	switch a.Format {
	case "":
	case FormatCSV:
		return writeCSV(ctx, out, src, q, csvOptions{bom: a.BOM, keepFormulas: a.KeepsFormulas(),
			progress: run.Progress, warn: run.Warn, yield: run.Yield})
	default:
		return jobs.Permanentf("bad_args", "unknown file format %q", a.Format)
	}
	opt := xlsxOptions{
		tmpDir: k.cfg.TmpDir, progress: run.Progress, warn: run.Warn, yield: run.Yield, spawn: run.Go,
		version: k.cfg.Version,
	}
	if resumable {
		opt.resumeDir, opt.attempt, opt.resume = k.resumeDir(run.JobID), run.Attempt, run.Resume
		opt.remote, opt.remotePrefix = k.cfg.Remote, run.JobID+"/"
		opt.keeping = func() { k.resuming.Store(run.JobID, struct{}{}) }
		opt.wantCheckpoint, opt.checkpoint, opt.resumed = run.WantsCheckpoint, run.Checkpoint, run.Resumed
	}
	return writeXLSX(ctx, out, src, q, opt)
}

// Resumable says whether an export of r continues from its last checkpoint after a
// crash (its source can resume it), and when not, why, for the report's page.
func (k *Kind) Resumable(r Report) (bool, string) {
	src, ok := k.sources[r.Source]
	if !ok {
		return false, "its source is not configured"
	}
	res, ok := src.(Resumer)
	if !ok {
		return false, "its source cannot continue a query where it stopped"
	}
	return res.Resumable(r)
}

// resumeFolder is the folder of TmpDir that holds, per job, the files an export keeps
// for the attempt that continues it (ARCHITECTURE.md, "Checkpoints and resume").
const resumeFolder = "resume"

// resumeDir is job id's folder of resume files.
func (k *Kind) resumeDir(id string) string { return filepath.Join(k.cfg.TmpDir, resumeFolder, id) }

// Ended implements jobs.Ender: a job that ended keeps no resume files, here or in the
// bucket. Only a job that may have some is looked for: one whose export made a
// checkpoint in this process, that ran more than once (perhaps on another node), or
// that the reaper ended (orphan: its attempt ran elsewhere); most exports end on their
// first attempt before any checkpoint, and cost nothing here. A bucket that does not
// answer now leaves its pieces to the janitor's sweep (RemoveResumeFiles).
func (k *Kind) Ended(job store.Job, orphan bool) {
	jobID := job.ID
	if _, mine := k.resuming.LoadAndDelete(jobID); !mine && !orphan && job.Attempt <= 1 {
		return
	}
	if k.cfg.TmpDir != "" {
		removeResumeDir(k.resumeDir(jobID))
	}
	if k.cfg.Remote != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := removeRemote(ctx, k.cfg.Remote, jobID+"/"); err != nil {
			slog.Default().Warn("export: checkpointed rows left in the bucket", "job_id", jobID, "err", err)
		}
	}
}

// SetRemote sets Config.Remote, for a server whose file store is opened after its kinds;
// call it before any export runs.
func (k *Kind) SetRemote(r RemoteFiles) { k.cfg.Remote = r }

// removeResumeDir removes a job's resume folder, and the folder of them all if that is
// empty then.
func removeResumeDir(dir string) {
	os.RemoveAll(dir)
	os.Remove(filepath.Dir(dir))
}

// removeRemoteLeftovers removes the bucket's pieces of jobs keep says no to.
func (k *Kind) removeRemoteLeftovers(keep func(string) bool) (int, error) {
	if k.cfg.Remote == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys, err := k.cfg.Remote.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("remove resume pieces: %w", err)
	}
	jobs := map[string]bool{}
	n := 0
	for _, key := range keys {
		id, _, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		kept, seen := jobs[id]
		if !seen {
			kept = keep(id)
			jobs[id] = kept
			if !kept {
				n++
			}
		}
		if !kept {
			if err := k.cfg.Remote.Delete(ctx, key); err != nil {
				return n, fmt.Errorf("remove resume pieces: %w", err)
			}
		}
	}
	return n, nil
}

// RemoveResumeFiles removes the resume folders of jobs that keep returns false for (a
// job that ended or is gone: an attempt that failed for good or succeeded removes its
// own, but a crash, a cancel or a deletion leaves one behind), and returns how many.
func (k *Kind) RemoveResumeFiles(keep func(jobID string) bool) (int, error) {
	n, err := k.removeRemoteLeftovers(keep)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if k.cfg.TmpDir == "" {
		return n, err
	}
	dir := filepath.Join(k.cfg.TmpDir, resumeFolder)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove resume files: %w", err))
	}
	for _, e := range entries {
		if !e.IsDir() || keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Report returns the report id as a request would use it now (the catalog's, or a
// built-in one), or an error wrapping ErrUnknownReport.
func (k *Kind) Report(id string) (Report, error) { return k.report(id) }

func (k *Kind) report(id string) (Report, error) {
	if k.cfg.Library != nil {
		return k.cfg.Library.Report(id)
	}
	for _, r := range Builtin() {
		if r.ID == id {
			return r, nil
		}
	}
	return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
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

// bindAttrs returns params with rep's from=person.<attr> parameters set from attr. A
// request never sets one: the value is whoever runs the report's, so that a member sees
// only their rows.
func bindAttrs(rep Report, params map[string]any, attr AttrFunc) (map[string]any, error) {
	var out map[string]any
	for _, p := range rep.Params {
		if p.From == "" {
			continue
		}
		if _, sent := params[p.Name]; sent {
			return nil, &ParamError{Param: p.Name, Message: "is set from the account running the report (person." + p.From + ") and cannot be given"}
		}
		var v string
		ok := false
		if attr != nil {
			v, ok = attr(p.From)
		}
		if !ok {
			return nil, &AttrError{Report: rep.ID, Param: p.Name, Attr: p.From}
		}
		if out == nil {
			out = maps.Clone(params)
			if out == nil {
				out = map[string]any{}
			}
		}
		out[p.Name] = v
	}
	if out == nil {
		return params, nil
	}
	return out, nil
}
