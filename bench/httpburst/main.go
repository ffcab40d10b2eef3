// Command httpburst sends the burst profile (100 requests a second for 20 s, 1,200 a
// second for 3 s, 100 a second for 30 s) to a running sheetq as a black box, with a plain
// net/http client, the way a script or another service would: one http.Client, its
// default transport with enough idle connections, a new Idempotency-Key per request,
// requests sent on schedule whether or not the earlier ones have been answered (open
// loop). It prints each phase's accept latency (p50, p95, p99, max), from just before
// Client.Do to the end of the answer's body, and fails if any request is not answered
// 202. It is the second measure of the burst beside `sheetq loadtest`, whose client
// writes its requests on raw connections (BENCHMARKS.md):
//
//	sheetq serve --workers 2 --addr 127.0.0.1:0     # logs msg=listening url=http://...
//	go run ./bench/httpburst -server URL -p rows=2000 -p seconds=0
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// phase is a stretch of the profile at one rate.
type phase struct {
	name string
	rate int // requests a second
	dur  time.Duration
}

// burst is `sheetq loadtest --profile burst`'s schedule.
var burst = []phase{{"before", 100, 20 * time.Second}, {"burst", 1200, 3 * time.Second}, {"after", 100, 30 * time.Second}}

type params map[string]any

func (p params) String() string { return fmt.Sprint(map[string]any(p)) }

func (p params) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if n, err := strconv.ParseFloat(val, 64); err == nil {
		p[k] = n
	} else {
		p[k] = val
	}
	return nil
}

func main() {
	server := flag.String("server", "", "the sheetq server's `URL`")
	report := flag.String("report", "demo", "the `report` every request exports")
	token := flag.String("token", "", "a bearer `token`, when the server asks for one")
	scale := flag.Float64("scale", 1, "multiply every phase's duration by this (a shorter run for a smoke test)")
	ps := params{}
	flag.Var(ps, "p", "a report parameter `NAME=VALUE` (repeatable)")
	flag.Parse()
	if err := run(os.Stdout, *server, *report, *token, ps, *scale); err != nil {
		fmt.Fprintln(os.Stderr, "httpburst:", err)
		os.Exit(1)
	}
}

// result is one request's outcome.
type result struct {
	phase   int
	latency time.Duration
	err     error
}

func run(out io.Writer, server, report, token string, ps params, scale float64) error {
	if server == "" {
		return errors.New("-server is required")
	}
	body, err := json.Marshal(map[string]any{"report": report, "params": map[string]any(ps)})
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := strings.TrimSuffix(server, "/") + "/api/v1/exports"
	send := func() (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "httpburst-"+rand.Text())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if res.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d", res.StatusCode)
		}
		return d, nil
	}
	// Warm the connections as a long-running client's would be, untimed.
	for range 20 {
		if _, err := send(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	start := time.Now()
	next := start
	for i, ph := range burst {
		dur := time.Duration(float64(ph.dur) * scale)
		interval := time.Second / time.Duration(ph.rate)
		end := next.Add(dur)
		for ; next.Before(end); next = next.Add(interval) {
			time.Sleep(time.Until(next))
			wg.Go(func() {
				d, err := send()
				mu.Lock()
				results = append(results, result{phase: i, latency: d, err: err})
				mu.Unlock()
			})
		}
	}
	wg.Wait()

	fmt.Fprintf(out, "# httpburst %s  %s  params %v  scale %g\n", time.Now().UTC().Format(time.RFC3339), server, map[string]any(ps), scale)
	fmt.Fprintf(out, "%-8s %6s %8s %8s %8s %8s %8s\n", "phase", "sent", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms")
	failed := 0
	for i, ph := range burst {
		var ds []time.Duration
		errs := 0
		for _, r := range results {
			switch {
			case r.phase != i:
			case r.err != nil:
				errs++
				if failed++; failed <= 3 {
					fmt.Fprintf(os.Stderr, "httpburst: %s: %v\n", ph.name, r.err)
				}
			default:
				ds = append(ds, r.latency)
			}
		}
		slices.Sort(ds)
		fmt.Fprintf(out, "%-8s %6d %8d %8s %8s %8s %8s\n", ph.name, len(ds)+errs, errs, pct(ds, 50), pct(ds, 95), pct(ds, 99), pct(ds, 100))
	}
	if failed > 0 {
		return fmt.Errorf("%d requests were not accepted", failed)
	}
	return nil
}

// pct is the p-th percentile of sorted ds in ms (nearest rank), "-" for none.
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	i := (len(ds)*p + 99) / 100
	i = min(max(i, 1), len(ds)) - 1
	return fmt.Sprintf("%.2f", float64(ds[i])/float64(time.Millisecond))
}
