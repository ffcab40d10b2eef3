//go:build !windows

package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"sheetq/internal/client"
	"sheetq/store"
)

// The crash matrix, modelled on how SQLite and Jepsen test themselves: kill the real
// binary with SIGKILL at every named fault point, many times, over many jobs; restart it;
// then drain with no fault armed and count what a client would care about. Every job a
// 202 accepted must exist (lost = 0), none may run to two files or two successes
// (duplicated = 0), no job may appear that no request asked for (unexpected = 0), every
// job ends SUCCEEDED with exactly the file it recorded, no temporary file is left, and
// the database passes PRAGMA integrity_check.
//
// SHEETQ_CRASH_KILLS sets how many fault kills the whole matrix makes (split evenly over
// the points; default 10, the CI cost); the random-kill load run adds a sixth of that
// again (at least 3). SHEETQ_CRASH_SEED replays a run.

// faultPoints are the named points compiled in with -tags faultpoints (jobs/fault_on.go).
var faultPoints = []string{"after-claim", "while-writing", "after-upload", "after-fsync", "after-rename", "after-commit"}

func crashKills(t *testing.T) int { return envCount(t, "SHEETQ_CRASH_KILLS", 10) }

func crashSeed(t *testing.T) uint64 { return envSeed(t, "SHEETQ_CRASH_SEED") }

// envCount reads a positive count from the environment variable name (def when unset),
// for the knobs that make a crash test longer or shorter.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// envSeed reads a seed from the environment variable name, to replay a run (a fresh one
// when unset).
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// requeuedStarts, subtracted from the count of a (job_id, type, attempt) group of
// job_events e, leaves a "started" group with the claims of the attempt that were not
// made again after a graceful stop requeued it: a requeue hands the attempt back
// without spending it (docs/how-it-works.md, "Shutdown"), so the next claim starts the
// same attempt number, and only a start beyond the requeues is two claims of one fencing
// token.
// It is written for both SQLite and PostgreSQL.
const requeuedStarts = `CASE WHEN e.type = 'started' THEN (SELECT COUNT(*) FROM job_events r
	WHERE r.job_id = e.job_id AND r.attempt = e.attempt AND r.type = 'requeued') ELSE 0 END`

// crashArgs make restarts cheap and keep every job alive through many kills: recovery
// spends an attempt, and the checker wants every job to end SUCCEEDED. An explicit
// reports folder skips the first-run sample; the built-in demo report stays.
func crashArgs(t *testing.T) []string {
	return []string{"--reports", t.TempDir(), "--heartbeat", "100ms", "--stale-after", "1s",
		"--max-attempts", "100", "--shutdown-grace", "10s", "--log-level", "info"}
}

// ledger is the client's side of the history: what it sent and what was acknowledged.
type ledger struct {
	t  *testing.T
	hc *http.Client

	mu       sync.Mutex
	bodies   map[string]string // key -> body, every request ever sent
	accepted map[string]string // key -> job id, once answered 202 (or 200 for a replay)
	unacked  []string          // keys sent without an answer yet (server died, refused)
	dupIDs   int               // the same key answered with two different job ids
}

func newLedger(t *testing.T) *ledger {
	return &ledger{t: t, hc: &http.Client{Timeout: 15 * time.Second},
		bodies: map[string]string{}, accepted: map[string]string{}}
}

// send posts the request under key once. It reports whether the server answered with a
// job; a connection error or a 5xx leaves the key to be sent again.
func (l *ledger) send(url, key, body string) bool {
	l.mu.Lock()
	l.bodies[key] = body
	l.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, url+"/api/v1/exports", strings.NewReader(body))
	if err != nil {
		l.t.Error(err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := l.hc.Do(req)
	if err != nil {
		return false // the server is down or died mid-request: indeterminate, retry
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 {
		return false
	}
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		l.t.Errorf("POST key %s: %s %s", key, res.Status, b)
		return false
	}
	var j client.Job
	if err := json.Unmarshal(b, &j); err != nil || j.ID == "" {
		l.t.Errorf("POST key %s: no job in %s (%v)", key, b, err)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.accepted[key]; ok && prev != j.ID {
		l.dupIDs++
		l.t.Errorf("key %s answered with job %s and later with job %s", key, prev, j.ID)
	}
	l.accepted[key] = j.ID
	return true
}

// submit sends a new request, remembering it as unacknowledged if it gets no answer.
func (l *ledger) submit(url, key, body string) {
	if !l.send(url, key, body) {
		l.mu.Lock()
		l.unacked = append(l.unacked, key)
		l.mu.Unlock()
	}
}

// resend retries every unacknowledged request with its own key; it returns how many
// are still without an answer.
func (l *ledger) resend(url string) int {
	l.mu.Lock()
	keys := l.unacked
	l.unacked = nil
	l.mu.Unlock()
	for _, k := range keys {
		l.mu.Lock()
		body := l.bodies[k]
		l.mu.Unlock()
		if !l.send(url, k, body) {
			l.mu.Lock()
			l.unacked = append(l.unacked, k)
			l.mu.Unlock()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.unacked)
}

func (l *ledger) snapshot() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]string, len(l.accepted))
	for k, v := range l.accepted {
		m[k] = v
	}
	return m
}

// launch starts the binary like startBinary, but a process that dies before it listens
// is an outcome here, not a failure: with jobs left from the last run, a fault point can
// fire while the engine starts, before the HTTP server is up.
func launch(t *testing.T, data string, env []string, args ...string) *proc {
	t.Helper()
	p, urlc := spawn(t, data, env, args...)
	select {
	case p.url = <-urlc:
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("sheetq neither listened nor died in time\n%s", p.log())
	}
	return p
}

// faultKilled reports whether the process killed itself at a fault point.
func (p *proc) faultKilled() bool {
	select {
	case <-p.done:
	default:
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && strings.Contains(p.log(), "sheetq: fault point")
}

// stop ends the process gracefully (SIGTERM) and requires a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("graceful stop exited %d\n%s", code, p.log())
	}
}

// drain starts the binary with no fault armed, sends every unacknowledged request again,
// waits until every accepted job is final, and stops the process gracefully.
func drain(t *testing.T, data string, l *ledger) {
	t.Helper()
	p := launch(t, data, nil, crashArgs(t)...)
	if p.url == "" {
		t.Fatalf("sheetq died while draining without a fault armed\n%s", p.log())
	}
	deadline := time.Now().Add(2 * time.Minute)
	for l.resend(p.url) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("requests still unanswered after the drain's deadline\n%s", p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for key, id := range l.snapshot() {
		for {
			j := p.get(t, id)
			if j.Status != "PENDING" && j.Status != "PROCESSING" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s (key %s) still %s after the drain's deadline\n%s", id, key, j.Status, p.log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	p.stop(t)
}

// invariants counts what the checker found; every field but jobs and succeeded must be 0.
type invariants struct {
	jobs, succeeded                   int
	lost, duplicated, unexpected      int
	notFinal, badFiles, leftoverFiles int
}

// checkInvariants checks the data directory of a stopped server against the requests
// the client saw accepted (idempotency key -> job id), reporting every violation with
// t.Errorf and returning the counts.
func checkInvariants(t *testing.T, data string, accepted map[string]string) invariants {
	t.Helper()
	var inv invariants
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "sheetq.db")+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var integrity string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("PRAGMA integrity_check = %q (%v), want ok", integrity, err)
	}

	type row struct {
		id, status, key, name, sha string
		size                       int64
	}
	rows, err := db.Query(`SELECT id, status, COALESCE(idempotency_key, ''), COALESCE(file_name, ''),
		COALESCE(file_sha256, ''), COALESCE(file_size, 0) FROM jobs WHERE kind = 'export'`)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]row{}
	byKey := map[string][]string{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.status, &r.key, &r.name, &r.sha, &r.size); err != nil {
			t.Fatal(err)
		}
		r.key = strings.TrimPrefix(r.key, store.ClientKey("")) // the key the client sent
		byID[r.id] = r
		byKey[r.key] = append(byKey[r.key], r.id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	inv.jobs = len(byID)

	// Lost: a 202 without its row. Duplicated: one key, several rows.
	for key, id := range accepted {
		if r, ok := byID[id]; !ok || r.key != key {
			inv.lost++
			t.Errorf("lost: key %s was accepted as job %s, which the database does not hold", key, id)
		}
	}
	wanted := map[string]bool{}
	for _, id := range accepted {
		wanted[id] = true
	}
	for key, ids := range byKey {
		if len(ids) > 1 {
			inv.duplicated += len(ids) - 1
			t.Errorf("duplicated: key %q has %d jobs %v", key, len(ids), ids)
		}
	}
	for id, r := range byID {
		if !wanted[id] {
			inv.unexpected++
			t.Errorf("unexpected: job %s (key %q, %s) was never acknowledged to a client", id, r.key, r.status)
		}
	}

	// Every job ran to one success, and a success is recorded once.
	type evCount struct{ success, starts, doubleStarts int }
	evs := map[string]*evCount{}
	erows, err := db.Query(`SELECT job_id, type, attempt, COUNT(*) - ` + requeuedStarts + ` FROM job_events e
		WHERE type IN ('succeeded', 'completed_from_file', 'started') GROUP BY job_id, type, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	for erows.Next() {
		var id, typ string
		var attempt, n int
		if err := erows.Scan(&id, &typ, &attempt, &n); err != nil {
			t.Fatal(err)
		}
		c := evs[id]
		if c == nil {
			c = &evCount{}
			evs[id] = c
		}
		if typ == "started" {
			c.starts += n
			if n > 1 {
				c.doubleStarts++ // two claims of one attempt: the fencing token was not unique
			}
		} else {
			c.success += n
		}
	}
	if err := erows.Err(); err != nil {
		t.Fatal(err)
	}
	erows.Close()
	for id, r := range byID {
		c := evs[id]
		if c == nil {
			c = &evCount{}
		}
		if r.status != "SUCCEEDED" {
			inv.notFinal++
			t.Errorf("job %s ended %s, want SUCCEEDED", id, r.status)
			continue
		}
		inv.succeeded++
		if c.success != 1 || c.doubleStarts > 0 {
			inv.duplicated++
			t.Errorf("job %s has %d success events and %d doubly claimed attempts, want 1 and 0", id, c.success, c.doubleStarts)
		}
		b, err := os.ReadFile(filepath.Join(data, "exports", id+".xlsx"))
		sum := sha256.Sum256(b)
		switch {
		case err != nil:
			inv.badFiles++
			t.Errorf("job %s SUCCEEDED but its file is missing: %v", id, err)
		case r.name != id+".xlsx" || int64(len(b)) != r.size || hex.EncodeToString(sum[:]) != r.sha:
			inv.badFiles++
			t.Errorf("job %s: file %s of %d bytes sha256 %x, recorded %s %d %s", id, id+".xlsx", len(b), sum, r.name, r.size, r.sha)
		}
	}

	// Exactly one file per SUCCEEDED job, and nothing else anywhere: no part file, no
	// spill file, no second copy.
	exp, err := os.ReadDir(filepath.Join(data, "exports"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exp {
		id, ok := strings.CutSuffix(e.Name(), ".xlsx")
		if r, known := byID[id]; !ok || !known || r.status != "SUCCEEDED" {
			inv.leftoverFiles++
			t.Errorf("exports/%s belongs to no SUCCEEDED job", e.Name())
		}
	}
	tmp, err := os.ReadDir(filepath.Join(data, "tmp"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range tmp {
		inv.leftoverFiles++
		t.Errorf("tmp/%s left behind", e.Name())
	}
	return inv
}

// One row per fault point: kill at the point again and again while jobs keep arriving,
// then drain and check the invariants.
func TestCrashMatrix(t *testing.T) {
	total := crashKills(t)
	perPoint := (total + len(faultPoints) - 1) / len(faultPoints)
	seed := crashSeed(t)
	t.Logf("crash matrix: %d kills per point, SHEETQ_CRASH_SEED=%d", perPoint, seed)
	var sum atomic.Int64
	for i, point := range faultPoints {
		t.Run(point, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			data := t.TempDir()
			l := newLedger(t)
			kills, rounds, next := 0, 0, 0
			for kills < perPoint {
				rounds++
				if rounds > 4*perPoint {
					t.Fatalf("only %d of %d kills in %d rounds: the point is not reached", kills, perPoint, rounds-1)
				}
				// The Nth hit, N from 1 to 3: each round submits 3 new jobs, and every
				// point is reached at least once per job.
				nth := 1 + rng.IntN(3)
				p := launch(t, data, []string{fmt.Sprintf("SHEETQ_FAULT=%s@%d", point, nth),
					fmt.Sprintf("SHEETQ_FAULT_SEED=%d", seed)}, crashArgs(t)...)
				if p.url != "" {
					l.resend(p.url)
					for range 3 {
						next++
						body := fmt.Sprintf(`{"report":"demo","params":{"rows":%d}}`, 50+rng.IntN(400))
						l.submit(p.url, fmt.Sprintf("%s-%d", point, next), body)
					}
				}
				select {
				case <-p.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("round %d: %s@%d did not fire\n%s", rounds, point, nth, p.log())
				}
				if !p.faultKilled() {
					t.Fatalf("round %d: the process exited without reaching %s: %v\n%s", rounds, point, p.err, p.log())
				}
				if want := fmt.Sprintf("fault point %s reached (hit %d,", point, nth); !strings.Contains(p.log(), want) {
					t.Fatalf("round %d: the process did not die at %q\n%s", rounds, want, p.log())
				}
				kills++
			}
			drain(t, data, l)
			inv := checkInvariants(t, data, l.snapshot())
			sum.Add(int64(kills))
			t.Logf("point %s: kills=%d jobs=%d succeeded=%d lost=%d duplicated=%d unexpected=%d not_final=%d bad_files=%d leftover_files=%d",
				point, kills, inv.jobs, inv.succeeded, inv.lost, inv.duplicated, inv.unexpected, inv.notFinal, inv.badFiles, inv.leftoverFiles)
		})
	}
	t.Logf("crash matrix: total kills=%d", sum.Load())
}

// Open-loop load (a request every 20 ms, whatever the server's state) while the server
// is SIGKILLed at random (seeded) times and restarted. A request that fails because
// the server is down is retried with the same Idempotency-Key. Then drain and check.
func TestCrashRandomKillsUnderLoad(t *testing.T) {
	want := max(3, crashKills(t)/6)
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	t.Logf("random-kill load run: %d kills at 50 req/s, SHEETQ_CRASH_SEED=%d", want, seed)
	data := t.TempDir()
	l := newLedger(t)

	var cur atomic.Pointer[proc]
	p := launch(t, data, nil, crashArgs(t)...)
	if p.url == "" {
		t.Fatalf("sheetq died at start\n%s", p.log())
	}
	cur.Store(p)

	stop := make(chan struct{})
	var senders sync.WaitGroup
	var sent atomic.Int64
	ticking := make(chan struct{}) // closed when the generator has stopped adding senders
	go func() {
		defer close(ticking)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			key, body := fmt.Sprintf("load-%d", i), fmt.Sprintf(`{"report":"demo","params":{"rows":%d}}`, 20+i%80)
			sent.Add(1)
			senders.Add(1)
			go func() {
				defer senders.Done()
				deadline := time.Now().Add(2 * time.Minute)
				for !l.send(cur.Load().url, key, body) {
					if time.Now().After(deadline) {
						l.t.Errorf("key %s: no answer within two minutes of retries", key)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
	}()

	for kills := 0; kills < want; kills++ {
		// A random moment, not a synchronisation: the point is to hit the server in
		// whatever state the load has put it.
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		p := cur.Load()
		p.kill(t)
		np := launch(t, data, nil, crashArgs(t)...)
		if np.url == "" {
			t.Fatalf("sheetq died at start without a fault armed\n%s", np.log())
		}
		cur.Store(np)
	}
	close(stop)
	<-ticking // no senders.Add after this: Wait must not race with Add
	senders.Wait()
	cur.Load().stop(t)

	drain(t, data, l)
	inv := checkInvariants(t, data, l.snapshot())
	t.Logf("random-kill load run: kills=%d requests=%d jobs=%d succeeded=%d lost=%d duplicated=%d unexpected=%d not_final=%d bad_files=%d leftover_files=%d",
		want, sent.Load(), inv.jobs, inv.succeeded, inv.lost, inv.duplicated, inv.unexpected, inv.notFinal, inv.badFiles, inv.leftoverFiles)
	if got := len(l.snapshot()); int64(got) != sent.Load() {
		t.Errorf("%d requests sent, %d acknowledged", sent.Load(), got)
	}
}

var faultHit = regexp.MustCompile(`fault point (\S+) reached \(hit (\d+), seed (\d+)\)`)

// A probabilistic fault point draws from SHEETQ_FAULT_SEED: the same seed kills at the
// same hit, so a failing run can be replayed. A malformed spec is refused at start.
func TestFaultPointProbabilityIsSeeded(t *testing.T) {
	hitAt := func() string {
		data := t.TempDir()
		p := launch(t, data, []string{"SHEETQ_FAULT=while-writing%10", "SHEETQ_FAULT_SEED=42"},
			append(crashArgs(t), "--workers", "1")...)
		if p.url == "" {
			t.Fatalf("died before listening\n%s", p.log())
		}
		l := newLedger(t)
		l.submit(p.url, "p-1", `{"report":"demo","params":{"rows":20000}}`)
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("while-writing%%10 never fired\n%s", p.log())
		}
		m := faultHit.FindStringSubmatch(p.log())
		if !p.faultKilled() || m == nil || m[1] != "while-writing" || m[3] != "42" {
			t.Fatalf("not killed at while-writing with seed 42: %v\n%s", p.err, p.log())
		}
		return m[2]
	}
	first, second := hitAt(), hitAt()
	if first != second {
		t.Errorf("seed 42 fired at hit %s, then at hit %s", first, second)
	}

	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "SHEETQ_FAULT=after-claim@0")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "SHEETQ_FAULT") {
		t.Fatalf("a bad SHEETQ_FAULT: %v\n%s", err, out)
	}
}
