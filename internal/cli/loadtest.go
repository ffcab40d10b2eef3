package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/internal/client"
	"sheetq/internal/cpuprofile"
)

// loadPhase is one stretch of a profile: requests at a fixed rate for a while.
type loadPhase struct {
	Name     string        `json:"name"`
	Rate     float64       `json:"rate"` // requests per second
	Duration time.Duration `json:"duration_ns"`
}

// maxLoadRequests bounds a steady run: 14 minutes at the burst's 1,200 requests/s.
const maxLoadRequests = 1_000_000

// loadProfile returns a named schedule: the promises of ARCHITECTURE.md, "Rules" (1, 11
// and 16), turned into figures.
func loadProfile(name string, rate float64, d time.Duration) ([]loadPhase, error) {
	if name != "steady" && (rate != 0 || d != 0) {
		return nil, fmt.Errorf("--rate and --duration are for --profile steady; %q has a schedule of its own", name)
	}
	switch name {
	case "burst":
		return []loadPhase{
			{"before", 100, 20 * time.Second},
			{"burst", 1200, 3 * time.Second},
			{"after", 100, 30 * time.Second},
		}, nil
	case "overload":
		return []loadPhase{{"overload", 1200, 10 * time.Second}}, nil
	case "steady":
		if !(rate > 0) || math.IsInf(rate, 0) || d <= 0 { // !(rate > 0) refuses NaN too
			return nil, errors.New("the steady profile needs --rate and --duration above zero")
		}
		// run sends int(rate * seconds) requests: fewer than one would be a run that
		// sends nothing, checks nothing and passes.
		if rate*d.Seconds() < 1 {
			return nil, fmt.Errorf("--rate %g for --duration %s sends no request; send at least one", rate, d)
		}
		// Every request is planned before the first goes out, and each job is then
		// checked against the server: a typo such as --rate 1e9 would first take the
		// memory of billions of plans.
		if n := rate * d.Seconds(); n > maxLoadRequests {
			return nil, fmt.Errorf("--rate %g for --duration %s is %.3g requests; a run sends at most %d", rate, d, n, maxLoadRequests)
		}
		return []loadPhase{{"steady", rate, d}}, nil
	}
	return nil, fmt.Errorf("unknown profile %q: want burst, overload or steady", name)
}

// loadConfig is what `sheetq loadtest` was asked to do.
type loadConfig struct {
	Server       string            `json:"server"`
	Profile      string            `json:"profile"`
	Phases       []loadPhase       `json:"phases"`
	Report       string            `json:"report"`
	Params       map[string]string `json:"params"`
	Timeout      time.Duration     `json:"timeout_ns"`
	Retries      int               `json:"retries"`
	DrainTimeout time.Duration     `json:"drain_timeout_ns"`
	Window       time.Duration     `json:"window_ns"`
	MaxInFlight  int               `json:"max_in_flight"`
	AllowErrors  bool              `json:"allow_errors"`
	Procs        int               `json:"procs"` // GOMAXPROCS of the load generator
	token        string
}

const loadtestUsage = `Usage: sheetq loadtest [flags]

Drive a running server with export requests on an open-loop schedule (each request goes
out on time, answered or not), follow the results on one event stream, then check every
request against the server: each 202 has its job, every job succeeded, none is missing,
none is duplicated. Prints a table of accept latency (sent -> 202) and final-result
latency (sent -> SUCCEEDED seen on /api/v1/events), p50/p95/p99/max per phase and per
window, with errors by kind. Exits 1 if the check fails or (without --allow-errors) any
request failed.

Profiles:
  burst      100 req/s for 20 s, 1,200 req/s for 3 s, 100 req/s for 30 s
  overload   1,200 req/s for 10 s, with a 5 s client timeout unless --timeout is set
  steady     --rate R for --duration D

Examples:
  sheetq serve --data "$(mktemp -d)" --workers 2 --addr 127.0.0.1:8090 &
  sheetq loadtest --server http://127.0.0.1:8090 --profile burst --json burst.json
  sheetq loadtest --server http://127.0.0.1:8090 --profile overload --allow-errors
  sheetq loadtest --server http://127.0.0.1:8090 --profile steady --rate 50 --duration 10s -p rows=500

Flags (each also read from SHEETQ_<NAME>, e.g. SHEETQ_DRAIN_TIMEOUT=5m):
`

// loadtestCmd runs `sheetq loadtest`.
func loadtestCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := loadConfig{Params: map[string]string{}}
	var (
		rate       float64
		duration   time.Duration
		jsonFile   string
		timeout    time.Duration
		cpuProfile string
		procs      int
	)
	params := map[string]string{}
	fs.StringVar(&cfg.Server, "server", "http://127.0.0.1:8080", "server `URL`")
	fs.StringVar(&cfg.token, "token", "", "access `token`, sent as Authorization: Bearer")
	fs.StringVar(&cfg.Profile, "profile", "burst", "load `profile`: burst, overload or steady")
	fs.Float64Var(&rate, "rate", 0, "steady profile: `requests` per second")
	fs.DurationVar(&duration, "duration", 0, "steady profile: how long to send")
	fs.StringVar(&cfg.Report, "report", "demo", "`report` to request")
	fs.Func("p", "report parameter `name=value` (repeatable; default rows=2000 seconds=0 for demo)", paramFlag(params))
	fs.DurationVar(&timeout, "timeout", 0, "client timeout per request (default 10s; 5s for overload)")
	fs.IntVar(&cfg.Retries, "retries", 1, "retries of a request that timed out or lost its connection, with the same Idempotency-Key")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 10*time.Minute, "how long to wait for every accepted job to finish")
	fs.DurationVar(&cfg.Window, "window", 5*time.Second, "width of the time windows in the report")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", 20000, "safety cap on requests awaiting an answer; requests over it are dropped and counted as errors")
	fs.BoolVar(&cfg.AllowErrors, "allow-errors", false, "exit 0 despite request errors (for overload), as long as the consistency check passes")
	fs.StringVar(&jsonFile, "json", "", "also write every figure as JSON to `FILE`")
	fs.IntVar(&procs, "procs", 1, "OS threads running the load generator's Go code at once (GOMAXPROCS); raise it when the report's scheduler lateness grows")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to `FILE` (to check it is not the bottleneck)")
	fs.Usage = func() {
		fmt.Fprint(stderr, loadtestUsage)
		printFlags(stderr, fs)
	}
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("loadtest takes no arguments, got %q", fs.Args())}
	}
	phases, err := loadProfile(cfg.Profile, rate, duration)
	if err != nil {
		return blameEnv(fs, usageError{err}, "rate", "duration", "profile")
	}
	cfg.Phases = phases
	if !strings.HasPrefix(cfg.Server, "http://") && !strings.HasPrefix(cfg.Server, "https://") {
		return blameEnv(fs, usageError{fmt.Errorf("--server %q: want an http:// or https:// URL", cfg.Server)}, "server")
	}
	cfg.Server = strings.TrimRight(cfg.Server, "/")
	cfg.Timeout = timeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
		if cfg.Profile == "overload" {
			cfg.Timeout = 5 * time.Second
		}
	}
	for _, c := range []struct {
		bad        bool
		name, rule string
	}{
		{cfg.Timeout < 0, "timeout", "cannot be negative"},
		{cfg.DrainTimeout <= 0, "drain-timeout", "must be positive"},
		{cfg.Window <= 0, "window", "must be positive"},
		{cfg.Retries < 0, "retries", "cannot be negative"},
		{cfg.MaxInFlight < 1, "max-in-flight", "must be at least 1"},
		{procs < 1, "procs", "must be at least 1"},
		{headerUnsafe(cfg.token), "token", "has a control character"},
	} {
		if c.bad {
			return blameEnv(fs, usageError{fmt.Errorf("--%s %s", c.name, c.rule)}, c.name)
		}
	}
	if jsonFile != "" {
		// Before any request: the figures of a run that took minutes would otherwise be
		// lost at its end to a folder that does not exist.
		if err := checkOutput("--json", jsonFile); err != nil {
			return blameEnv(fs, usageError{err}, "json")
		}
	}
	if cfg.Report == "demo" {
		cfg.Params["rows"], cfg.Params["seconds"] = "2000", "0"
	}
	for k, v := range params {
		cfg.Params[k] = v
	}

	// The load generator shares the machine with the server it measures (loopback only).
	// With a P per core its idle threads spin looking for work and wake each other,
	// which takes cores from the server; one P sends 1,200 requests/s with a core to
	// spare and costs a fifth less CPU per request (BENCHMARKS.md, "A quieter load
	// client"). The scheduler lateness in the report shows when it is not enough.
	runtime.GOMAXPROCS(procs)
	cfg.Procs = procs

	stopProfile, err := cpuprofile.Start(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	lt, err := newLoadTest(cfg)
	if err != nil {
		return blameEnv(fs, usageError{err}, "server")
	}
	defer lt.sender.close()
	res, err := lt.run(ctx, stderr)
	if err != nil {
		return err
	}
	res.print(stdout)
	if jsonFile != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write --json: %w", err)
		}
	}
	switch {
	case !res.Check.OK:
		return fmt.Errorf("consistency check failed: %s", strings.Join(res.Check.Problems, "; "))
	case res.Errors.Total > 0 && !cfg.AllowErrors:
		return fmt.Errorf("%d requests failed (use --allow-errors to accept that)", res.Errors.Total)
	}
	return nil
}

// loadRequest is one scheduled request and what became of it.
type loadRequest struct {
	phase   int
	planned time.Duration // since the start of the run
	key     string        // Idempotency-Key, unique per request; retries reuse it

	// Set by the request's goroutine; read after the run (the WaitGroup orders them).
	sent     time.Time // first attempt
	lateness time.Duration
	answered time.Time // 202 (or a replay) received
	accept   time.Duration
	jobID    string
	attempts int
	errKind  string // why the first attempt failed ("" when it was answered with 202)
	retried  bool   // answered by a retry
	replayed bool   // the answer said Idempotent-Replayed
}

type loadTest struct {
	cfg    loadConfig
	hc     *http.Client
	sender *acceptSender // POST /api/v1/exports, the requests being measured
	events *eventFollower

	inFlight atomic.Int64
	wg       sync.WaitGroup
}

func newLoadTest(cfg loadConfig) (*loadTest, error) {
	// The event stream and the checks after the run (one GET per job, many at once):
	// enough idle connections that those reuse them instead of opening (and leaving in
	// TIME_WAIT) one per request. The measured POSTs go through sender.
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	body, _ := json.Marshal(map[string]any{"report": cfg.Report, "params": cfg.Params})
	sender, err := newAcceptSender(cfg.Server, cfg.token, body)
	if err != nil {
		return nil, err
	}
	return &loadTest{cfg: cfg, hc: &http.Client{Transport: tr}, sender: sender}, nil
}

func (lt *loadTest) run(ctx context.Context, progress io.Writer) (*loadResult, error) {
	api := client.New(lt.cfg.Server, lt.cfg.token, lt.hc)
	// Fail fast on a wrong URL, token or report before sending thousands of requests.
	if _, err := api.Call(ctx, http.MethodGet, "/api/v1/exports?limit=1", nil, nil); err != nil {
		return nil, fmt.Errorf("server %s: %w", lt.cfg.Server, err)
	}
	lt.events = newEventFollower(api)
	if err := lt.events.start(ctx); err != nil {
		return nil, err
	}
	defer lt.events.stop()

	runID := randomHex(6)
	var reqs []*loadRequest
	var offset time.Duration
	for pi, ph := range lt.cfg.Phases {
		n := int(ph.Rate * ph.Duration.Seconds())
		for i := range n {
			reqs = append(reqs, &loadRequest{
				phase:   pi,
				planned: offset + time.Duration(float64(i)/ph.Rate*float64(time.Second)),
				key:     fmt.Sprintf("loadtest-%s-%06d", runID, len(reqs)),
			})
		}
		offset += ph.Duration
	}
	fmt.Fprintf(progress, "loadtest: %d requests over %s (profile %s) to %s\n", len(reqs), offset, lt.cfg.Profile, lt.cfg.Server)

	srv0, srvOK := readServer(ctx, api)
	cpu0 := cpuTime()
	start := time.Now()
	lt.schedule(ctx, start, reqs)
	sendDone := time.Now()
	lt.wg.Wait()
	answersDone := time.Now()
	clientCPU := cpuTime() - cpu0
	var server *serverStats
	if srv1, ok := readServer(ctx, api); ok && srvOK {
		server = serverBetween(srv0, srv1, len(reqs))
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Requests left without an answer are retried with their key until answered, so
	// that every job the server made can be told apart from one nobody asked for.
	lt.settle(ctx, reqs)

	drainStart := time.Now()
	fmt.Fprintf(progress, "loadtest: sending took %s; waiting up to %s for the jobs to finish\n",
		sendDone.Sub(start).Round(time.Millisecond), lt.cfg.DrainTimeout)
	drained := lt.drain(ctx, reqs, progress)
	drainTime := time.Since(drainStart)

	check := lt.verify(ctx, start, reqs, drained)
	res := summarize(lt.cfg, start, reqs, lt.events)
	res.Check = check
	res.Server = server
	res.Client = clientStats{
		SendSeconds:       sendDone.Sub(start).Seconds(),
		AnswersSeconds:    answersDone.Sub(start).Seconds(),
		DrainSeconds:      drainTime.Seconds(),
		CPUSeconds:        clientCPU.Seconds(),
		CPUPerRequestUS:   float64(clientCPU.Microseconds()) / float64(max(len(reqs), 1)),
		Lateness:          res.lateness,
		StreamReconnects:  lt.events.reconnects.Load(),
		StatsComputeMS:    res.statsCost.Seconds() * 1000,
		StreamEventsSeen:  lt.events.seen.Load(),
		InFlightCapDrops:  res.Errors.Kinds["dropped_by_cap"],
		MaxInFlightConfig: lt.cfg.MaxInFlight,
	}
	return res, nil
}

// schedule sends reqs at their planned times, open loop: each request gets its own
// goroutine, so a slow answer never delays the next request.
func (lt *loadTest) schedule(ctx context.Context, start time.Time, reqs []*loadRequest) {
	for _, r := range reqs {
		if d := time.Until(start.Add(r.planned)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		now := time.Now()
		r.lateness = now.Sub(start.Add(r.planned))
		r.sent = now
		if lt.inFlight.Load() >= int64(lt.cfg.MaxInFlight) {
			r.errKind = "dropped_by_cap"
			continue
		}
		lt.inFlight.Add(1)
		lt.wg.Add(1)
		go func() {
			defer lt.wg.Done()
			defer lt.inFlight.Add(-1)
			lt.send(ctx, r)
		}()
	}
}

// send makes a request's first attempt and, when it timed out or lost its connection,
// up to --retries more with the same key.
func (lt *loadTest) send(ctx context.Context, r *loadRequest) {
	for attempt := 0; attempt <= lt.cfg.Retries; attempt++ {
		kind := lt.post(ctx, r, lt.cfg.Timeout)
		if attempt == 0 {
			r.errKind = kind
		}
		if kind == "" {
			r.retried = attempt > 0
			return
		}
		if kind != "timeout" && kind != "connection" {
			return // the server answered: a retry would get the same answer
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// post sends one attempt of r and returns "" on a 202 (or an idempotent replay), else
// the kind of error.
func (lt *loadTest) post(ctx context.Context, r *loadRequest, timeout time.Duration) string {
	r.attempts++
	t0 := time.Now()
	res, err := lt.sender.send(ctx, r.key, t0.Add(timeout))
	now := time.Now()
	if err != nil {
		if sendTimedOut(err) {
			return "timeout"
		}
		return "connection"
	}
	// A first attempt must get 202; a retry may find its job already finished (200).
	if res.status != http.StatusAccepted && !(res.replayed && res.status == http.StatusOK) {
		return fmt.Sprintf("status_%d", res.status)
	}
	var j struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(res.body, &j) != nil || j.ID == "" {
		return "bad_response"
	}
	r.jobID, r.answered, r.replayed = j.ID, now, res.replayed
	if r.attempts == 1 {
		r.accept = now.Sub(t0)
	}
	return ""
}

// settle retries, with a long timeout, every request that never got an answer, so its
// job (if the server made one before the client gave up) is known by id.
func (lt *loadTest) settle(ctx context.Context, reqs []*loadRequest) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, r := range reqs {
		if r.jobID != "" || (r.errKind != "timeout" && r.errKind != "connection") {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for range 3 {
				if k := lt.post(ctx, r, time.Minute); k == "" || (k != "timeout" && k != "connection") {
					if k == "" {
						r.retried = true
					}
					return
				}
			}
		}()
	}
	wg.Wait()
}

// drain waits until every known job has been seen final on the event stream, and
// reports whether that happened within --drain-timeout.
func (lt *loadTest) drain(ctx context.Context, reqs []*loadRequest, progress io.Writer) bool {
	deadline := time.Now().Add(lt.cfg.DrainTimeout)
	lastReport := time.Now()
	var pending []string
	for _, r := range reqs {
		if r.jobID != "" {
			pending = append(pending, r.jobID)
		}
	}
	for {
		// Keep only the jobs not seen final yet, so each pass gets cheaper.
		left := pending[:0]
		for _, id := range pending {
			if _, ok := lt.events.final(id); !ok {
				left = append(left, id)
			}
		}
		pending = left
		if len(left) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		if time.Since(lastReport) >= 10*time.Second {
			fmt.Fprintf(progress, "loadtest: %d jobs not finished yet\n", len(left))
			lastReport = time.Now()
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
