package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sheetq/internal/durable"
)

// exportCmd runs `sheetq export REPORT [-p name=value]... [--wait] [-o FILE] [--json]`.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cf     clientFlags
		params = map[string]string{}
		wait   bool
		out    string
		asJSON bool
	)
	cf.register(fs)
	fs.Func("p", "report parameter `name=value` (repeatable)", paramFlag(params))
	fs.BoolVar(&wait, "wait", false, "wait for the export, showing its progress, and download the file")
	fs.StringVar(&out, "o", "", "with --wait, save the file as `FILE` (default: the server's file name, in the current folder)")
	fs.BoolVar(&asJSON, "json", false, "print the job as JSON (with --wait, the finished job; progress goes to stderr)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sheetq export REPORT [-p name=value]... [--wait] [-o FILE] [--json] [--server URL]

Ask a running sheetq server for an export of REPORT. Without --wait it prints the job id.
With --wait it follows the export's progress and downloads the file, checking its sha256.
Example:
  sheetq export demo -p rows=50000 -p seconds=10 --wait -o demo.xlsx

Exit status: 0 done, 1 the export failed, 2 bad command line or rejected request
(unknown report, bad param), 3 the export was canceled, 4 server or network error,
130 interrupted while waiting (the export keeps running).

Flags (each also read from SHEETQ_<NAME>, e.g. SHEETQ_SERVER, SHEETQ_TOKEN):
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("export takes one REPORT (try: sheetq export --help)")}
	}
	if out != "" && !wait {
		return usageError{errors.New("-o needs --wait")}
	}
	if wait {
		// Before any request: a path that cannot be written would otherwise be found
		// only after the export ran, and exit as if the export had failed.
		if err := checkOutput(out); err != nil {
			return usageError{err}
		}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}

	key := loadPendingKey(c.base, pos[0], params)
	if key.Resumed {
		fmt.Fprintln(stderr, "sheetq: resuming the export this command started before it was interrupted")
	}
	job, raw, err := createExport(ctx, c, pos[0], params, key.Key, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return exitError{exitInterrupted, errors.New("interrupted")}
		}
		var p *apiProblem
		if errors.As(err, &p) && p.Status < 500 {
			key.done() // refused: running the command again is a new request
		}
		return classify(err)
	}
	// Once the export ends (or is handed over without --wait) the request is complete;
	// an interrupted --wait keeps the key so that running the command again reattaches.
	defer func() {
		if !wait || job.finished() {
			key.done()
		}
	}()
	if !wait {
		if asJSON {
			return writeIndented(stdout, raw)
		}
		fmt.Fprintln(stdout, job.ID)
		return nil
	}

	progressOut := stdout
	if asJSON {
		progressOut = stderr
	}
	pr := newProgress(progressOut, isTerminal(progressOut))
	pr.update(job)
	job, err = waitJob(ctx, c, job, pr)
	pr.done()
	if err != nil {
		if ctx.Err() != nil {
			return exitError{exitInterrupted, fmt.Errorf("interrupted; export %s keeps running (sheetq jobs show %s)", job.ID, job.ID)}
		}
		return classify(err)
	}
	switch job.Status {
	case "SUCCEEDED":
	case "CANCELED":
		return exitError{exitCanceled, fmt.Errorf("export %s was canceled", job.ID)}
	case "FAILED":
		code, msg := "unknown", "no error recorded"
		if job.Error != nil {
			code, msg = job.Error.Code, job.Error.Message
		}
		return exitError{exitFailed, fmt.Errorf("export %s failed after %d attempts: %s: %s", job.ID, job.Attempt, code, msg)}
	default: // EXPIRED
		return exitError{exitFailed, fmt.Errorf("export %s ended %s: its file is gone", job.ID, job.Status)}
	}
	path, err := download(ctx, c, job, out)
	if err != nil {
		if ctx.Err() != nil {
			return exitError{exitInterrupted, fmt.Errorf("interrupted while downloading export %s", job.ID)}
		}
		return classify(err)
	}
	if asJSON {
		_, b, err := c.getJob(ctx, job.ID)
		if err != nil {
			return classify(err)
		}
		return writeIndented(stdout, b)
	}
	fmt.Fprintf(stdout, "saved %s (%d bytes, sha256 %s)\n", path, job.File.Size, job.File.SHA256)
	return nil
}

// createExport posts the export with one Idempotency-Key, retrying the very same
// request on network errors and 5xx answers: however many tries, one job.
func createExport(ctx context.Context, c *apiClient, report string, params map[string]string, key string, stderr io.Writer) (clientJob, []byte, error) {
	var job clientJob
	body := map[string]any{"report": report, "params": params}
	hdr := http.Header{"Idempotency-Key": {key}}
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		b, err := c.call(ctx, http.MethodPost, "/api/v1/exports", body, hdr)
		if err == nil {
			if err := json.Unmarshal(b, &job); err != nil || job.ID == "" {
				return job, nil, fmt.Errorf("bad answer from the server: %s", strings.TrimSpace(string(b)))
			}
			return job, b, nil
		}
		var p *apiProblem
		retryable := !errors.As(err, &p) || p.Status >= 500
		if !retryable || attempt == 4 || ctx.Err() != nil {
			return job, nil, err
		}
		fmt.Fprintf(stderr, "sheetq: %v; trying again in %s\n", err, backoff)
		select {
		case <-ctx.Done():
			return job, nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// waitJob follows the job until it ends: the event stream, reconnecting with
// Last-Event-ID when it drops, and polling every 2 s when the stream cannot be had.
func waitJob(ctx context.Context, c *apiClient, job clientJob, pr *progress) (clientJob, error) {
	if job.finished() {
		return job, nil
	}
	var lastID string
	failures := 0
	for failures < 3 {
		connected, err := followStream(ctx, c, &job, &lastID, pr)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return job, err
		}
		if job.finished() {
			return job, nil
		}
		if connected {
			failures = 0
		} else {
			failures++
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(time.Duration(failures) * 500 * time.Millisecond):
		}
	}
	// Polling: the stream is unavailable (a proxy that buffers it, say).
	netErrs := 0
	for {
		j, _, err := c.getJob(ctx, job.ID)
		switch {
		case err == nil:
			netErrs = 0
			job = j
			pr.update(job)
			if job.finished() {
				return job, nil
			}
		case ctx.Err() != nil:
			return job, ctx.Err()
		default:
			var p *apiProblem
			if errors.As(err, &p) && p.Status < 500 {
				return job, err
			}
			if netErrs++; netErrs > 15 {
				return job, err
			}
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// followStream reads GET /api/v1/events?job=ID until the job ends or the stream drops.
// connected reports whether the stream was opened; err is only a fatal error (a
// problem other than 5xx, or the context ending).
func followStream(ctx context.Context, c *apiClient, job *clientJob, lastID *string, pr *progress) (connected bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if *lastID != "" {
		hdr.Set("Last-Event-ID", *lastID)
	}
	resp, err := c.request(ctx, http.MethodGet, "/api/v1/events?job="+url.QueryEscape(job.ID), nil, hdr)
	if err != nil {
		var p *apiProblem
		if errors.As(err, &p) && p.Status < 500 {
			return false, err
		}
		return false, nil
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return false, nil
	}
	// The job may have ended before the stream was opened: look once.
	if j, _, err := c.getJob(ctx, job.ID); err == nil {
		*job = j
		pr.update(*job)
		if job.finished() {
			return true, nil
		}
	}
	// A stream that goes silent past two keep-alives (15 s each) is dead.
	watchdog := time.AfterFunc(40*time.Second, cancel)
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var event, id string
	var data strings.Builder
	for sc.Scan() {
		watchdog.Reset(40 * time.Second)
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if id != "" {
				*lastID = id
			}
			if data.Len() > 0 {
				handleEvent(event, data.String(), job, pr)
				if job.finished() {
					return true, nil
				}
			}
			event, id = "", ""
			data.Reset()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "id":
			id = value
		}
	}
	return true, nil
}

func handleEvent(event, data string, job *clientJob, pr *progress) {
	switch event {
	case "progress":
		var p struct {
			ID        string `json:"id"`
			Rows      int64  `json:"rows"`
			TotalRows *int64 `json:"total_rows"`
		}
		if json.Unmarshal([]byte(data), &p) == nil && p.ID == job.ID {
			job.Progress.Rows, job.Progress.TotalRows = p.Rows, p.TotalRows
			pr.update(*job)
		}
	case "snapshot":
		var s struct {
			Jobs []clientJob `json:"jobs"`
		}
		if json.Unmarshal([]byte(data), &s) == nil {
			for _, j := range s.Jobs {
				if j.ID == job.ID {
					*job = j
					pr.update(*job)
				}
			}
		}
	default:
		var m struct {
			Job *clientJob `json:"job"`
		}
		if json.Unmarshal([]byte(data), &m) == nil && m.Job != nil && m.Job.ID == job.ID {
			*job = *m.Job
			pr.update(*job)
		}
	}
}

// download saves the job's file as out (default: the server's name), through out.part,
// and checks its sha256 against the job's.
func download(ctx context.Context, c *apiClient, job clientJob, out string) (string, error) {
	if job.File == nil {
		return "", errors.New("the server reports no file for export " + job.ID)
	}
	path := job.DownloadURL
	if path == "" {
		path = "/api/v1/exports/" + url.PathEscape(job.ID) + "/file"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		name, err := downloadOnce(ctx, c, path, job, out)
		if err == nil {
			return name, nil
		}
		lastErr = err
		var p *apiProblem
		var ee exitError
		if (errors.As(err, &p) && p.Status < 500) || errors.As(err, &ee) || ctx.Err() != nil {
			break
		}
	}
	return "", lastErr
}

// checkOutput tells whether the file can be saved as out (or, when out is "", under the
// server's name in the current folder): out is not a folder, and its folder exists and
// takes a new file. It creates and removes a probe file, never out itself.
func checkOutput(out string) error {
	name := "-o " + out
	if out == "" {
		name = "the current folder"
	} else if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a folder; name the file to save", name)
	}
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: the folder %s does not exist", name, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	case !fi.IsDir():
		return fmt.Errorf("%s: %s is not a folder", name, dir)
	}
	if err := durable.Writable(dir); err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", name, dir, err)
	}
	return nil
}

func downloadOnce(ctx context.Context, c *apiClient, path string, job clientJob, out string) (string, error) {
	resp, err := c.request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if out == "" {
		out = job.File.Name
		if _, ps, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && ps["filename"] != "" {
			out = ps["filename"]
		}
		out = filepath.Base(filepath.Clean("/" + out)) // a name, never a path
		if out == "/" || out == "." {
			out = job.ID + ".xlsx"
		}
	}
	part := out + ".part"
	f, err := os.Create(part)
	if err != nil {
		return "", exitError{exitFailed, err}
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
	if err == nil {
		err = f.Sync() // the name must never point at a partial file
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(part)
		return "", err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, job.File.SHA256) {
		os.Remove(part)
		return "", exitError{exitServer, fmt.Errorf("downloaded file is corrupt: sha256 %s (%d bytes), the server says %s (%d bytes)", sum, n, job.File.SHA256, job.File.Size)}
	}
	if err := os.Rename(part, out); err != nil {
		os.Remove(part)
		return "", exitError{exitFailed, err}
	}
	return out, nil
}

// progress shows a job's progress: a bar redrawn in place on a terminal, plain lines
// (state changes, and rows at most every 2 s) otherwise.
type progress struct {
	w         io.Writer
	tty       bool
	drawn     bool
	status    string
	attempt   int
	lastLine  time.Time
	lastRows  int64
	rateStart time.Time
	rateRows  int64
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty, lastRows: -1} }

func (p *progress) update(j clientJob) {
	now := time.Now()
	changed := j.Status != p.status || j.Attempt != p.attempt
	p.status, p.attempt = j.Status, j.Attempt
	if j.Status == "PROCESSING" && (p.rateStart.IsZero() || j.Progress.Rows < p.rateRows) {
		p.rateStart, p.rateRows = now, j.Progress.Rows
	}
	if !p.tty {
		if changed {
			line := fmt.Sprintf("export %s: %s", j.ID, j.Status)
			if j.Attempt > 0 {
				line += fmt.Sprintf(" (attempt %d of %d)", j.Attempt, j.MaxAttempts)
			}
			if j.Error != nil && !j.finished() {
				line += fmt.Sprintf(" after %s: %s", j.Error.Code, j.Error.Message)
			}
			fmt.Fprintln(p.w, line)
		} else if j.Status == "PROCESSING" && j.Progress.Rows != p.lastRows && now.Sub(p.lastLine) >= 2*time.Second {
			fmt.Fprintf(p.w, "export %s: %s rows%s\n", j.ID, j.rows(), p.percentETA(j, now))
			p.lastLine, p.lastRows = now, j.Progress.Rows
		}
		return
	}
	line := fmt.Sprintf("%s %-10s", shortID(j.ID), j.Status)
	if j.Progress.TotalRows != nil && *j.Progress.TotalRows > 0 {
		frac := min(float64(j.Progress.Rows)/float64(*j.Progress.TotalRows), 1)
		const width = 30
		filled := int(frac * width)
		line += " [" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
	}
	line += " " + j.rows() + " rows" + p.percentETA(j, now)
	fmt.Fprintf(p.w, "\r%-79s", line)
	p.drawn = true
}

// percentETA is ", 42%, ETA 1m3s" when the total is known.
func (p *progress) percentETA(j clientJob, now time.Time) string {
	if j.Progress.TotalRows == nil || *j.Progress.TotalRows <= 0 {
		return ""
	}
	total := *j.Progress.TotalRows
	s := fmt.Sprintf(", %d%%", j.Progress.Rows*100/total)
	if el := now.Sub(p.rateStart); j.Status == "PROCESSING" && el > time.Second && j.Progress.Rows > p.rateRows {
		rate := float64(j.Progress.Rows-p.rateRows) / el.Seconds()
		eta := time.Duration(float64(total-j.Progress.Rows) / rate * float64(time.Second))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

func (p *progress) done() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// paramFlag parses one -p name=value into params.
func paramFlag(params map[string]string) func(string) error {
	return func(s string) error {
		name, value, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("want name=value, got %q", s)
		}
		params[name] = value
		return nil
	}
}
