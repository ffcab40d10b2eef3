package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"sheetq/internal/client"
)

// latency is a distribution in milliseconds. Samples are kept and sorted exactly: a run
// has at most tens of thousands of them, which sort in a few milliseconds (the report
// shows the cost as stats_compute_ms).
type latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func newLatency(samples []time.Duration) latency {
	if len(samples) == 0 {
		return latency{}
	}
	slices.Sort(samples)
	q := func(p float64) float64 {
		// Nearest rank: the smallest sample with at least p of them at or below it.
		i := int(float64(len(samples))*p+0.999999) - 1
		return ms(samples[min(max(i, 0), len(samples)-1)])
	}
	return latency{N: len(samples), P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: ms(samples[len(samples)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// window is the figures of the requests planned within one stretch of the run.
type window struct {
	Name     string         `json:"name"`
	Phase    string         `json:"phase"`
	From     float64        `json:"from_s"` // seconds since the start of the run
	To       float64        `json:"to_s"`
	Sent     int            `json:"sent"`
	Accepted int            `json:"accepted"` // 202 on the first attempt
	Errors   map[string]int `json:"errors,omitempty"`
	Accept   latency        `json:"accept"` // sent -> 202
	Final    latency        `json:"final"`  // sent -> SUCCEEDED seen on the event stream
}

type errorCounts struct {
	Total int            `json:"total"`
	Kinds map[string]int `json:"kinds"` // timeout, connection, status_NNN, bad_response, dropped_by_cap
}

// checkResult is the consistency check of every request against the server.
type checkResult struct {
	OK         bool     `json:"ok"`
	Problems   []string `json:"problems,omitempty"`
	Requests   int      `json:"requests"`
	WithJob    int      `json:"with_job"` // requests that ended with a job id (first attempt or retry)
	Succeeded  int      `json:"succeeded"`
	NotFinal   int      `json:"not_succeeded"` // jobs the server shows in another state
	Missing    int      `json:"missing"`       // a 202 whose job the server does not have
	Duplicates int      `json:"duplicates"`    // two keys answered with one job
	Unexpected int      `json:"unexpected"`    // jobs in the run's window that no request knows
	Unanswered int      `json:"unanswered"`    // requests that never got an answer, even on retry
	Retried    int      `json:"answered_by_retry"`
	// Replayed is how many retries found the job their timed-out attempt had made.
	Replayed int  `json:"retry_found_existing_job"`
	Drained  bool `json:"drained"`
}

type clientStats struct {
	SendSeconds       float64 `json:"send_s"`
	AnswersSeconds    float64 `json:"answers_s"`
	DrainSeconds      float64 `json:"drain_s"`
	CPUSeconds        float64 `json:"cpu_s"` // client process, while sending
	CPUPerRequestUS   float64 `json:"cpu_per_request_us"`
	Lateness          latency `json:"scheduler_lateness"` // actual send - planned send
	StreamEventsSeen  int64   `json:"stream_events"`
	StreamReconnects  int64   `json:"stream_reconnects"`
	StatsComputeMS    float64 `json:"stats_compute_ms"`
	InFlightCapDrops  int     `json:"in_flight_cap_drops"`
	MaxInFlightConfig int     `json:"max_in_flight"`
}

type loadResult struct {
	Config  loadConfig  `json:"config"`
	Start   time.Time   `json:"start"`
	Overall window      `json:"overall"`
	Phases  []window    `json:"phases"`
	Windows []window    `json:"windows"`
	Errors  errorCounts `json:"errors"`
	Check   checkResult `json:"check"`
	Client  clientStats `json:"client"`
	// Server is nil when the server's /metrics has no process_cpu_seconds_total.
	Server *serverStats `json:"server,omitempty"`

	lateness  latency
	statsCost time.Duration
}

// summarize computes the figures per phase, per window and overall.
func summarize(cfg loadConfig, start time.Time, reqs []*loadRequest, ev *eventFollower) *loadResult {
	t0 := time.Now()
	res := &loadResult{Config: cfg, Start: start, Errors: errorCounts{Kinds: map[string]int{}}}
	type acc struct {
		w             window
		accept, final []time.Duration
	}
	newAcc := func(name, phase string, from, to time.Duration) *acc {
		return &acc{w: window{Name: name, Phase: phase, From: from.Seconds(), To: to.Seconds(), Errors: map[string]int{}}}
	}
	overall := newAcc("overall", "", 0, 0)
	var phases []*acc
	var off time.Duration
	for _, ph := range cfg.Phases {
		phases = append(phases, newAcc(ph.Name, ph.Name, off, off+ph.Duration))
		off += ph.Duration
	}
	overall.w.To = off.Seconds()
	windows := map[int]*acc{}
	var late []time.Duration
	for _, r := range reqs {
		wi := int(r.planned / cfg.Window)
		w, ok := windows[wi]
		if !ok {
			from := time.Duration(wi) * cfg.Window
			w = newAcc(fmt.Sprintf("%g-%gs", from.Seconds(), (from+cfg.Window).Seconds()), cfg.Phases[r.phase].Name, from, from+cfg.Window)
			windows[wi] = w
		} else if w.w.Phase != cfg.Phases[r.phase].Name && !strings.Contains(w.w.Phase, "+") {
			w.w.Phase += "+" + cfg.Phases[r.phase].Name
		}
		late = append(late, r.lateness)
		var final time.Duration
		if r.jobID != "" {
			if fs, ok := ev.final(r.jobID); ok && fs.status == "SUCCEEDED" {
				final = max(fs.at.Sub(r.sent), 0)
			}
		}
		for _, a := range []*acc{overall, phases[r.phase], w} {
			a.w.Sent++
			if r.errKind == "" {
				a.w.Accepted++
				a.accept = append(a.accept, r.accept)
			} else {
				a.w.Errors[r.errKind]++
			}
			if final > 0 {
				a.final = append(a.final, final)
			}
		}
		if r.errKind != "" {
			res.Errors.Total++
			res.Errors.Kinds[r.errKind]++
		}
	}
	done := func(a *acc) window {
		a.w.Accept, a.w.Final = newLatency(a.accept), newLatency(a.final)
		if len(a.w.Errors) == 0 {
			a.w.Errors = nil
		}
		return a.w
	}
	res.Overall = done(overall)
	for _, p := range phases {
		res.Phases = append(res.Phases, done(p))
	}
	keys := make([]int, 0, len(windows))
	for k := range windows {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		res.Windows = append(res.Windows, done(windows[k]))
	}
	res.lateness = newLatency(late)
	res.statsCost = time.Since(t0)
	return res
}

// verify checks every request against the server.
func (lt *loadTest) verify(ctx context.Context, start time.Time, reqs []*loadRequest, drained bool) checkResult {
	c := checkResult{Requests: len(reqs), Drained: drained}
	api := client.New(lt.cfg.Server, lt.cfg.token, lt.hc)
	byJob := map[string]string{} // job id -> the key that got it
	var withJob []*loadRequest
	for _, r := range reqs {
		if r.retried {
			c.Retried++
			if r.replayed {
				c.Replayed++
			}
		}
		if r.jobID == "" {
			if r.errKind == "timeout" || r.errKind == "connection" {
				c.Unanswered++
			}
			continue
		}
		c.WithJob++
		if k, ok := byJob[r.jobID]; ok && k != r.key {
			c.Duplicates++
			continue
		}
		byJob[r.jobID] = r.key
		withJob = append(withJob, r)
	}

	// Each job, by GET, in a few parallel streams.
	var mu sync.Mutex
	var wg sync.WaitGroup
	var otherErr error
	next := make(chan *loadRequest)
	for range 16 {
		wg.Go(func() {
			for r := range next {
				j, _, err := api.GetJob(ctx, r.jobID)
				mu.Lock()
				var p *client.Problem
				switch {
				case errors.As(err, &p) && p.Status == http.StatusNotFound:
					c.Missing++
				case err != nil:
					otherErr = err
				case j.Status == "SUCCEEDED":
					c.Succeeded++
				default:
					c.NotFinal++
				}
				mu.Unlock()
			}
		})
	}
	for _, r := range withJob {
		next <- r
	}
	close(next)
	wg.Wait()

	// Every job of this report created since the run began must belong to a request.
	unexpected, err := lt.unexpectedJobs(ctx, api, start, byJob)
	if err != nil && otherErr == nil {
		otherErr = err
	}
	c.Unexpected = unexpected

	add := func(cond bool, format string, args ...any) {
		if cond {
			c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
		}
	}
	add(otherErr != nil, "could not check: %v", otherErr)
	add(!drained, "not every job finished within --drain-timeout %s", lt.cfg.DrainTimeout)
	add(c.Missing > 0, "%d accepted jobs missing on the server", c.Missing)
	add(c.NotFinal > 0, "%d jobs did not succeed", c.NotFinal)
	add(c.Duplicates > 0, "%d requests with their own key were answered with another request's job", c.Duplicates)
	add(c.Unexpected > 0, "%d jobs on the server belong to no request", c.Unexpected)
	add(c.Unanswered > 0, "%d requests never got an answer, even on retry", c.Unanswered)
	c.OK = len(c.Problems) == 0
	return c
}

// unexpectedJobs counts jobs of the run's report created since start that no request
// was answered with, paging the list newest first until it reaches older jobs.
func (lt *loadTest) unexpectedJobs(ctx context.Context, api *client.Client, start time.Time, known map[string]string) (int, error) {
	n := 0
	cursor := ""
	since := start.Truncate(time.Millisecond)
	for {
		q := url.Values{"report": {lt.cfg.Report}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Exports    []client.Job `json:"exports"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := getJSON(ctx, api, "/api/v1/exports?"+q.Encode(), &page); err != nil {
			return n, fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range page.Exports {
			if j.CreatedAt == nil || j.CreatedAt.Before(since) {
				return n, nil
			}
			if _, ok := known[j.ID]; !ok {
				n++
			}
		}
		if page.NextCursor == "" {
			return n, nil
		}
		cursor = page.NextCursor
	}
}

// print writes the report as a table.
func (res *loadResult) print(w io.Writer) {
	cfg := res.Config
	var params []string
	for k, v := range cfg.Params {
		params = append(params, k+"="+v)
	}
	sort.Strings(params)
	fmt.Fprintf(w, "sheetq loadtest: profile %s, %d requests, report %s %s, client timeout %s, server %s\n",
		cfg.Profile, res.Overall.Sent, cfg.Report, strings.Join(params, " "), cfg.Timeout, cfg.Server)
	fmt.Fprintf(w, "accept = sent -> 202 received; final = sent -> SUCCEEDED seen on the event stream; milliseconds\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "window\tphase\tsent\t202\terrors\taccept p50\tp95\tp99\tmax\tfinal p50\tp95\tp99\tmax\t")
	row := func(x window) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", x.Name, x.Phase, x.Sent, x.Accepted,
			x.Sent-x.Accepted, x.Accept.P50, x.Accept.P95, x.Accept.P99, x.Accept.Max, x.Final.P50, x.Final.P95, x.Final.P99, x.Final.Max)
	}
	for _, x := range res.Phases {
		row(x)
	}
	row(res.Overall)
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t\t\t")
	for _, x := range res.Windows {
		row(x)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if res.Errors.Total == 0 {
		fmt.Fprintln(w, "errors: none")
	} else {
		var kinds []string
		for k, n := range res.Errors.Kinds {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "errors: %d (%s)\n", res.Errors.Total, strings.Join(kinds, ", "))
	}
	c := res.Check
	verdict := "OK"
	if !c.OK {
		verdict = "FAILED: " + strings.Join(c.Problems, "; ")
	}
	fmt.Fprintf(w, "check: %s\n  %d requests, %d with a job, %d succeeded, %d not succeeded, %d missing, %d duplicate, %d unexpected, %d unanswered; %d answered by a retry (%d found the job a timed-out attempt had made)\n",
		verdict, c.Requests, c.WithJob, c.Succeeded, c.NotFinal, c.Missing, c.Duplicates, c.Unexpected, c.Unanswered, c.Retried, c.Replayed)
	cl := res.Client
	fmt.Fprintf(w, "client: scheduler lateness p50 %.2f p99 %.2f max %.2f ms; CPU %.1f s while sending (%.0f us/request); %d stream events, %d reconnects; sending %.1f s, drain %.1f s; stats in %.1f ms\n",
		cl.Lateness.P50, cl.Lateness.P99, cl.Lateness.Max, cl.CPUSeconds, cl.CPUPerRequestUS, cl.StreamEventsSeen, cl.StreamReconnects,
		cl.SendSeconds, cl.DrainSeconds, cl.StatsComputeMS)
	if sv := res.Server; sv != nil {
		fmt.Fprintf(w, "server: CPU %.1f s while sending (%.0f us/request, running exports included; process_cpu_seconds_total on /metrics)\n",
			sv.CPUSeconds, sv.CPUPerRequestUS)
		if wr := sv.Writes; wr != nil {
			fmt.Fprintf(w, "server: %d write transactions while sending, p50 about %.2f ms, p99 about %.2f ms, %d over 5 ms, %d over 10 ms (sheetq_store_write_seconds)\n",
				wr.Count, wr.P50MS, wr.P99MS, wr.Over5MS, wr.Over10MS)
		}
	} else {
		fmt.Fprintln(w, "server: CPU not known (its /metrics has no process_cpu_seconds_total)")
	}
}

func getJSON(ctx context.Context, api *client.Client, path string, v any) error {
	b, err := api.Call(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
