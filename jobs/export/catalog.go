package export

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"sheetq/internal/filekind"
)

// Reload timing: a reload waits for the folder to be quiet for catalogDebounce, so an
// editor's save-by-rename or a burst of writes makes one reload, but never waits more
// than catalogMaxWait after the first event, so a file written non-stop still shows up.
const (
	catalogDebounce = 150 * time.Millisecond
	catalogMaxWait  = 2 * time.Second
)

// Entry is one report of a Catalog: a loaded report, or a file that failed to load.
type Entry struct {
	// Report is the loaded report; for a broken file only ID (from the file name) and
	// File are set.
	Report Report
	// Err is nil if the report loaded, and a *ParseError if its file is broken.
	Err error
	// File names the report's file as its folder's name and its own
	// (reports/orders.sql); empty for a built-in report.
	File string
}

// Catalog is the set of reports: the built-ins (export.Builtin()) plus the .sql files of
// a folder, kept current by watching the folder with fsnotify. It implements Library.
type Catalog struct {
	dir      string
	builtin  []Report
	log      *slog.Logger
	debounce time.Duration // tests shorten it
	maxWait  time.Duration
	queues   map[string]bool // the queues a report may name (SetQueues); nil: any

	mu      sync.RWMutex
	entries []Entry        // built-ins and files, sorted by id then file
	byID    map[string]int // id -> index in entries of the entry Report answers with

	// seen is each file's content hash and error at the last reload, so a broken file
	// is logged once per change rather than on every reload. Only the reload path
	// (Start, then the watch goroutine) touches it.
	seen map[string]fileState

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}

	runMu  sync.Mutex // serialises Start and Stop
	cancel context.CancelFunc
	done   chan struct{} // closed when the watch goroutine has returned; nil when not started
}

type fileState struct {
	hash [sha256.Size]byte
	err  string
}

// loaded is one file's outcome in a folder scan.
type loaded struct {
	entry Entry
	state fileState
}

// NewCatalog returns a catalog of builtin plus the reports in dir. Until Start it
// holds the built-ins only. A nil log discards.
func NewCatalog(dir string, builtin []Report, log *slog.Logger) *Catalog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{
		dir:      dir,
		builtin:  slices.Clone(builtin),
		log:      log,
		debounce: catalogDebounce,
		maxWait:  catalogMaxWait,
		seen:     map[string]fileState{},
		subs:     map[chan struct{}]struct{}{},
	}
	c.publish(nil)
	return c
}

// SetQueues names the queues the config defines: a report whose "-- queue:" names
// another is broken, with the line that names it, like any load error. It must be
// called before Start; without it any queue name is accepted.
func (c *Catalog) SetQueues(names []string) {
	c.queues = map[string]bool{}
	for _, n := range names {
		c.queues[n] = true
	}
}

// Start creates the folder if it is missing, loads it and watches it until Stop. The
// reports are loaded when Start returns. Like every background service of sheetq
// (ARCHITECTURE.md, "Services"), ctx bounds the start-up work and gives the watcher its
// values, but its cancellation does not stop the watcher: Stop does, and waits.
func (c *Catalog) Start(ctx context.Context) error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.done != nil {
		return errors.New("report catalog: already started")
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("create reports folder: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch reports folder: %w", err)
	}
	// Watch before the first scan, so that a change made during it is not missed.
	if err := w.Add(c.dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch reports folder %s: %w", c.dir, err)
	}
	c.reload(ctx)
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go c.watch(ctx, w, c.done)
	return nil
}

// Stop stops watching and waits for the watcher to finish. The catalog keeps answering
// with the reports it last loaded.
func (c *Catalog) Stop() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.done == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel, c.done = nil, nil
}

// Report implements Library: it returns an error wrapping ErrUnknownReport for an
// unknown id, and the *ParseError of a report whose file is broken.
func (c *Catalog) Report(id string) (Report, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, ok := c.byID[id]
	if !ok {
		return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
	}
	if e := c.entries[i]; e.Err != nil {
		return Report{}, e.Err
	}
	return cloneReport(c.entries[i].Report), nil
}

// Entries returns every report, built-in or file, loaded or broken, sorted by id. A
// file whose id is a built-in's sorts after it and carries an error.
func (c *Catalog) Entries() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Entry, len(c.entries))
	for i, e := range c.entries {
		e.Report = cloneReport(e.Report)
		out[i] = e
	}
	return out
}

// Subscribe returns a channel that receives after each reload, and a func that ends
// the subscription. Notifications coalesce: a slow reader gets one for many reloads,
// so it should re-read Entries. The channel is never closed.
func (c *Catalog) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.subMu.Lock()
	c.subs[ch] = struct{}{}
	c.subMu.Unlock()
	return ch, sync.OnceFunc(func() {
		c.subMu.Lock()
		delete(c.subs, ch)
		c.subMu.Unlock()
	})
}

// CheckDir parses every report file in dir once, without watching, and returns them
// sorted by id (the built-ins are not listed, but their ids are reserved). The error
// is for a folder that cannot be read; broken files are entries with Err set. queues
// are the queues a report may name, as SetQueues takes them; nil accepts any name.
func CheckDir(dir string, queues []string) ([]Entry, error) {
	var known map[string]bool
	if queues != nil {
		known = map[string]bool{}
		for _, q := range queues {
			known[q] = true
		}
	}
	// The command line is the server's own user: full paths say the most there.
	files, err := scanDir(dir, reservedIDs(Builtin()), known, filepath.Clean)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(files))
	for i, f := range files {
		out[i] = f.entry
	}
	return out, nil
}

// watch turns the folder's events into debounced reloads until ctx is done.
func (c *Catalog) watch(ctx context.Context, w *fsnotify.Watcher, done chan<- struct{}) {
	defer close(done)
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		fire  <-chan time.Time // nil while no reload is due
		first time.Time        // the first event since the last reload
	)
	schedule := func() {
		now := time.Now()
		if fire == nil {
			first = now
		}
		timer.Reset(max(0, min(c.debounce, first.Add(c.maxWait).Sub(now))))
		fire = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == filepath.Clean(c.dir) {
				if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					c.log.WarnContext(ctx, "reports folder removed or renamed: its reports are gone until a restart", "dir", c.dir)
					schedule()
				}
				continue
			}
			// Chmod alone changes no content; indexers and backup tools cause a stream of them.
			if ev.Op == fsnotify.Chmod || !isReportFileName(filepath.Base(ev.Name)) {
				continue
			}
			schedule()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events; a reload re-reads the whole folder anyway.
			c.log.WarnContext(ctx, "watch reports folder", "dir", c.dir, "error", err)
			schedule()
		case <-fire:
			fire = nil
			c.reload(ctx)
		}
	}
}

// reload re-reads the whole folder, which is simpler and sturdier than applying each
// event: renames, overflows and half-written files all settle on the next reload.
func (c *Catalog) reload(ctx context.Context) {
	files, err := scanDir(c.dir, reservedIDs(c.builtin), c.queues, shownReportFile)
	if err != nil {
		c.log.ErrorContext(ctx, "read reports folder", "dir", c.dir, "error", err)
	}
	seen := make(map[string]fileState, len(files))
	broken := 0
	for _, f := range files {
		seen[f.entry.File] = f.state
		if f.entry.Err == nil {
			continue
		}
		broken++
		if old, ok := c.seen[f.entry.File]; ok && old == f.state {
			continue // unchanged since it was logged
		}
		// The log, for whoever runs the server, names the file by its full path.
		path := filepath.Join(c.dir, filepath.Base(f.entry.File))
		attrs := []any{"file", path, "error", f.entry.Err.Error()}
		if pe, ok := errors.AsType[*ParseError](f.entry.Err); ok {
			attrs = []any{"file", path, "line", pe.Line, "error", pe.Msg}
		}
		c.log.WarnContext(ctx, "report file is broken", attrs...)
	}
	c.seen = seen
	c.publish(files)
	c.log.InfoContext(ctx, "reports loaded", "dir", c.dir, "files", len(files), "broken", broken)
	c.notify()
}

// publish swaps in the built-ins plus files as the current set.
func (c *Catalog) publish(files []loaded) {
	entries := make([]Entry, 0, len(c.builtin)+len(files))
	for _, r := range c.builtin {
		entries = append(entries, Entry{Report: r})
	}
	for _, f := range files {
		entries = append(entries, f.entry)
	}
	// Built-ins have no file, so they sort before a file that reuses their id.
	slices.SortStableFunc(entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Report.ID, b.Report.ID), cmp.Compare(a.File, b.File))
	})
	byID := make(map[string]int, len(entries))
	for i, e := range entries {
		if _, ok := byID[e.Report.ID]; !ok {
			byID[e.Report.ID] = i
		}
	}
	c.mu.Lock()
	c.entries, c.byID = entries, byID
	c.mu.Unlock()
}

func (c *Catalog) notify() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default: // one is already pending
		}
	}
}

// scanDir parses every report file in dir, sorted by id then name. A file that
// vanishes during the scan is skipped: its removal brings another reload. queues are
// the queues a report may name (nil: any); show names a file's path in the entries and
// their errors.
func scanDir(dir string, reserved, queues map[string]bool, show func(path string) string) ([]loaded, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read reports folder: %w", err)
	}
	var out []loaded
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || !isReportFileName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		f, ok := loadFile(path, show(path), reserved, queues)
		if ok {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b loaded) int {
		return cmp.Or(cmp.Compare(a.entry.Report.ID, b.entry.Report.ID), cmp.Compare(a.entry.File, b.entry.File))
	})
	return out, nil
}

// loadFile reads and parses one report file; ok is false if the file no longer exists.
// The entry, its report and its errors name the file shown.
func loadFile(path, shown string, reserved, queues map[string]bool) (f loaded, ok bool) {
	name := filepath.Base(path)
	broken := func(err *ParseError) (loaded, bool) {
		id := name[:len(name)-len(reportExt)] // isReportFileName checked the extension
		e := Entry{Report: Report{ID: id, File: shown}, Err: err, File: shown}
		f.state.err = err.Error()
		return loaded{entry: e, state: f.state}, true
	}
	src, err := readReportFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(path); lerr != nil {
			return loaded{}, false
		}
		// A link whose target is missing (a moved file, an unmounted share) is a report
		// that would otherwise vanish from the list without a word. The target is not
		// named: it may be a server path, and the entry is shown by the API.
		return broken(&ParseError{File: shown, Msg: "read: a link to a file that does not exist"})
	}
	f.state.hash = sha256.Sum256(src)
	if err != nil {
		msg := err.Error()
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			msg = pe.Err.Error() // the path is already in the ParseError
		}
		return broken(&ParseError{File: shown, Msg: "read: " + msg})
	}
	rep, err := parseReport(shown, src, queues)
	if err != nil {
		pe, _ := errors.AsType[*ParseError](err)
		return broken(pe)
	}
	if reserved[rep.ID] {
		return broken(&ParseError{File: shown, Msg: fmt.Sprintf("report id %q is reserved for the built-in report", rep.ID)})
	}
	return loaded{entry: Entry{Report: rep, File: shown}, state: f.state}, true
}

// shownReportFile is how a report file is named wherever a user may see it (the API,
// job errors, a job's stored report): its folder's name and its own, such as
// reports/orders.sql, never the server's absolute path.
func shownReportFile(path string) string {
	return filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

// readReportFile reads at most one byte more than MaxReportSize, enough for the parser
// to refuse a file that is too large without reading all of it. Only a regular file is
// read: a named pipe would hold the scan, and with it the server's start, the watcher
// and Stop (or reports check), until a writer came. O_NONBLOCK keeps the open itself
// from waiting for one (it changes nothing for a regular file), and the type is checked
// on the opened file.
func readReportFile(path string) ([]byte, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", filekind.Of(st.Mode()))
	}
	return io.ReadAll(io.LimitReader(fh, MaxReportSize+1))
}

// isReportFileName reports whether a folder entry is a report file to load. Dotfiles
// and editors' lock, swap and backup files (.#x.sql, x.sql~, x.sql.swp, ~$x.sql) are
// not. The extension is matched in any case so that X.SQL shows up as broken (ids
// are lowercase) instead of being ignored.
func isReportFileName(name string) bool {
	if name == "" || strings.ContainsAny(name[:1], ".~#") {
		return false
	}
	return len(name) > len(reportExt) && strings.EqualFold(name[len(name)-len(reportExt):], reportExt)
}

func reservedIDs(builtin []Report) map[string]bool {
	ids := make(map[string]bool, len(builtin))
	for _, r := range builtin {
		ids[r.ID] = true
	}
	return ids
}

// cloneReport copies the parts of r a caller could change under the catalog's feet.
func cloneReport(r Report) Report {
	if r.Params != nil {
		r.Params = slices.Clone(r.Params)
	}
	r.Columns = slices.Clone(r.Columns)
	return r
}
