// Package events fans job events out to Server-Sent Events clients: the hub tails the
// store's event log (woken by the engine's OnChange), coalesces progress, and serves
// GET /api/v1/events with replay by Last-Event-ID (ARCHITECTURE.md, "Data flow of one
// export", step 10).
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// Config tunes the hub. Zero fields take the defaults.
type Config struct {
	// Buffer is how many messages a client may fall behind before it is disconnected
	// (default 1024; more than one tailer read, so a burst does not drop a client that
	// keeps up).
	Buffer int
	// KeepAlive is how often an idle stream gets a comment line, so that proxies and
	// load balancers do not close it (default 15 s).
	KeepAlive time.Duration
	// Poll is how often the tailer reads new events when nothing woke it (default 1 s).
	Poll time.Duration
	// ProgressEvery is the shortest time between two progress events of one job
	// (default 250 ms).
	ProgressEvery time.Duration
	// Retry is the reconnection delay suggested to clients (default 3 s).
	Retry time.Duration
	// Gather is the shortest time between two reads of new events (default 10 ms). A
	// burst commits hundreds of times a second; one read a few milliseconds later takes
	// all of them for the CPU of one, which the requests being accepted need more.
	Gather time.Duration
	// Visible says whether the identity of a stream's request (ctx) may see an export
	// whose owner (created_by) and report these are (access.go); nil: every stream sees
	// every export.
	Visible func(ctx context.Context, owner, report string) bool
}

func (c Config) withDefaults() Config {
	c.Buffer = cmp.Or(c.Buffer, 1024)
	c.KeepAlive = cmp.Or(c.KeepAlive, 15*time.Second)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, 250*time.Millisecond)
	c.Retry = cmp.Or(c.Retry, 3*time.Second)
	c.Gather = cmp.Or(c.Gather, 10*time.Millisecond)
	return c
}

// tailPage is how many events the tailer and a replay read at a time.
const tailPage = 256

// errHubStopped refuses a subscription once the server is shutting down.
var errHubStopped = errors.New("event hub stopped")

// sseMessage is one event ready to send; data is marshalled once and shared by every
// client that receives it.
type sseMessage struct {
	cursor string // the store's cursor just after the event, its SSE id; "": no id line (progress)
	job    string // the job it is about, for ?job=
	event  string
	data   []byte
	// known is set when the message carries its job's owner and report (an event of a
	// job that still exists), which a member's stream checks (access.go); progress and
	// deletions do not, and reach only streams that saw the job.
	known         bool
	owner, report string
}

// subscriber is one open stream. The hub only ever sends to ch without blocking; when
// ch is full the subscriber is dropped and gone is closed.
type subscriber struct {
	job  string // "": every job
	ch   chan sseMessage
	gone chan struct{} // closed when dropped or when the hub stops
}

// progressFigures are a running job's latest progress report.
type progressFigures struct{ rows, total int64 }

// Log is what the hub reads from the store: the event log, by opaque cursors that any
// node of the same database understands, and the jobs it is about. *store.Store
// (SQLite) and *pg.Store (PostgreSQL) are both one.
type Log interface {
	// EventHead is the cursor of the present: live events come after it.
	EventHead(ctx context.Context) (string, error)
	// EventsKept says whether every event after cursor is still stored (false: pruned
	// by retention, or not from this log); a cursor the store cannot read is
	// store.ErrBadCursor.
	EventsKept(ctx context.Context, cursor string) (bool, error)
	// EventsSince and JobEventsSince read, in order, the events after cursor that can no
	// longer be overtaken by one committing later, each with its own cursor, and return
	// the cursor after the last.
	EventsSince(ctx context.Context, cursor string, limit int) ([]store.CursorEvent, string, error)
	JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]store.CursorEvent, string, error)
	JobsByID(ctx context.Context, ids []string) (map[string]store.Job, error)
	Unfinished(ctx context.Context) ([]store.Job, error)
	Get(ctx context.Context, id string) (store.Job, error)
}

// Hub fans job events out to SSE clients. One goroutine tails job_events by cursor (woken
// by the engine, with a slow poll as a fallback) and emits coalesced progress; clients get
// messages through bounded buffers, so a slow client never slows the engine or the
// other clients: it is disconnected instead, and replays what it missed on reconnect.
type Hub struct {
	cfg    Config
	st     Log
	log    *slog.Logger
	report problem.Reporter

	wake chan struct{} // capacity 1: a pending wake-up is enough

	mu       sync.Mutex
	subs     map[*subscriber]struct{}
	stopped  bool
	stopping chan struct{} // closed by Stop: other long-lived streams end with the hub's
	dropped  int64         // clients disconnected for falling behind

	nsubs atomic.Int64 // len(subs), read by the Progress hook without a lock
	reads atomic.Int64 // the tailer's reads of the log so far: tests wait on it

	pmu     sync.Mutex
	pending map[string]progressFigures // by job id; emptied on every progress tick

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// New returns a hub over st; Start it before serving. report answers the stream's
// errors.
func New(st Log, cfg Config, log *slog.Logger, report problem.Reporter) *Hub {
	return &Hub{
		cfg:      cfg.withDefaults(),
		st:       st,
		log:      log,
		report:   report,
		wake:     make(chan struct{}, 1),
		stopping: make(chan struct{}),
		subs:     map[*subscriber]struct{}{},
		pending:  map[string]progressFigures{},
	}
}

// Wire makes the engine wake the hub on every change, tell it of deleted jobs and report
// progress to it, keeping any hooks already set.
func (h *Hub) Wire(cfg *jobs.Config) {
	onChange, onDelete, onProgress := cfg.OnChange, cfg.OnDelete, cfg.OnProgress
	cfg.OnChange = func() {
		if onChange != nil {
			onChange()
		}
		h.Notify()
	}
	cfg.OnDelete = func(id string) {
		if onDelete != nil {
			onDelete(id)
		}
		h.Deleted(id)
	}
	cfg.OnProgress = func(id string, rows, total int64) {
		if onProgress != nil {
			onProgress(id, rows, total)
		}
		h.Progress(id, rows, total)
	}
}

// Start begins tailing job_events after the store's present position.
func (h *Hub) Start(ctx context.Context) error {
	head, err := h.st.EventHead(ctx)
	if err != nil {
		return fmt.Errorf("start event hub: %w", err)
	}
	ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		h.run(ctx, head)
	}()
	return nil
}

// Stop ends every open stream and the tailer. It is safe to call more than once.
func (h *Hub) Stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	close(h.stopping)
	for s := range h.subs {
		h.dropLocked(s)
	}
	h.mu.Unlock()
	if h.cancel != nil {
		h.cancel()
	}
	h.done.Wait()
}

// Notify makes the tailer read new events now instead of at its next poll. It never
// blocks.
func (h *Hub) Notify() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Progress records a running job's latest figures; the tailer sends them at most once
// per ProgressEvery. It is called on every row, so it only takes a short lock, and
// nothing at all while no client listens.
func (h *Hub) Progress(jobID string, rows, total int64) {
	if h.nsubs.Load() == 0 {
		return
	}
	h.pmu.Lock()
	h.pending[jobID] = progressFigures{rows, total}
	h.pmu.Unlock()
}

// subscribe registers a client for live messages about job ("" for all jobs).
func (h *Hub) subscribe(job string) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, errHubStopped
	}
	s := &subscriber{job: job, ch: make(chan sseMessage, h.cfg.Buffer), gone: make(chan struct{})}
	h.subs[s] = struct{}{}
	h.nsubs.Add(1)
	return s, nil
}

// unsubscribe removes a client whose stream ended.
func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.nsubs.Add(-1)
	}
}

// dropLocked disconnects s; h.mu is held.
func (h *Hub) dropLocked(s *subscriber) {
	delete(h.subs, s)
	h.nsubs.Add(-1)
	close(s.gone)
}

// Stats is a count of the hub's clients.
type Stats struct {
	Clients int   // open streams
	Dropped int64 // streams disconnected for falling behind, since the hub was made
}

// Stats reports how many clients are connected and how many were dropped.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Clients: len(h.subs), Dropped: h.dropped}
}

// publish hands m to every interested client without blocking; a client whose buffer is
// full is dropped.
func (h *Hub) publish(msgs ...sseMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range msgs {
		for s := range h.subs {
			if s.job != "" && s.job != m.job {
				continue
			}
			select {
			case s.ch <- m:
			default:
				h.dropLocked(s)
				h.dropped++
			}
		}
	}
}

// run is the tailer: it reads events after cursor when woken or polled, and sends the
// coalesced progress figures on every progress tick. Both happen on this one goroutine,
// so a job's last progress figures are never sent after the event that ended its attempt.
// It publishes events in the store's cursor order, which is what lets each stream skip
// the ones it replayed by comparing cursors (stream.go).
func (h *Hub) run(ctx context.Context, cursor string) {
	poll := time.NewTicker(h.cfg.Poll)
	defer poll.Stop()
	prog := time.NewTicker(h.cfg.ProgressEvery)
	defer prog.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-prog.C:
			h.flushProgress()
			continue
		case <-h.wake:
			if d := h.cfg.Gather - time.Since(last); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
		case <-poll.C:
		}
		last = time.Now()
		next, err := h.tail(ctx, cursor)
		if err != nil && ctx.Err() == nil {
			h.log.ErrorContext(ctx, "tail job events", "cursor", cursor, "err", err)
		}
		cursor = next
		h.reads.Add(1)
	}
}

// tail publishes every event after cursor and returns the new cursor.
func (h *Hub) tail(ctx context.Context, cursor string) (string, error) {
	for {
		evs, next, err := h.st.EventsSince(ctx, cursor, tailPage)
		if err != nil || len(evs) == 0 {
			return cursor, err
		}
		msgs, err := eventMessages(ctx, h.st, evs)
		if err != nil {
			return cursor, err
		}
		// Progress recorded before an attempt ended is stale once the event is out.
		h.pmu.Lock()
		for _, e := range evs {
			if e.Status != store.StatusProcessing {
				delete(h.pending, e.JobID)
			}
		}
		h.pmu.Unlock()
		h.publish(msgs...)
		cursor = next
		if len(evs) < tailPage {
			return cursor, nil
		}
	}
}

// flushProgress publishes the figures recorded since the last tick, one message per job.
func (h *Hub) flushProgress() {
	h.pmu.Lock()
	if len(h.pending) == 0 {
		h.pmu.Unlock()
		return
	}
	pending := h.pending
	h.pending = make(map[string]progressFigures, len(pending))
	h.pmu.Unlock()
	msgs := make([]sseMessage, 0, len(pending))
	for id, p := range pending {
		pj := apiv1.ProgressEvent{ID: id, Rows: p.rows}
		if p.total >= 0 {
			pj.TotalRows = &p.total
		}
		data, err := json.Marshal(pj)
		if err != nil {
			continue
		}
		msgs = append(msgs, sseMessage{job: id, event: "progress", data: data})
	}
	h.publish(msgs...)
}

// Deleted tells the streams that a job was deleted. Deleting removes the job's stored
// events, so this message, like progress, has no id and is never replayed.
func (h *Hub) Deleted(jobID string) {
	data, err := json.Marshal(apiv1.Deleted{ID: jobID})
	if err != nil {
		return
	}
	h.publish(sseMessage{job: jobID, event: "deleted", data: data})
}

// eventMessages turns stored events into messages, with their jobs' current state.
func eventMessages(ctx context.Context, st Log, evs []store.CursorEvent) ([]sseMessage, error) {
	ids := make([]string, 0, len(evs))
	seen := map[string]bool{}
	for _, e := range evs {
		if !seen[e.JobID] {
			seen[e.JobID] = true
			ids = append(ids, e.JobID)
		}
	}
	jobsByID, err := st.JobsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]sseMessage, 0, len(evs))
	for _, e := range evs {
		j, ok := jobsByID[e.JobID]
		if ok && j.Kind != export.Name {
			// Webhook deliveries are jobs too, but the stream is about exports; their
			// attempts show up as webhook_* events on the export itself.
			continue
		}
		d := apiv1.StateEvent{Event: apiv1.Event{ID: e.ID, Type: e.Type, Status: string(e.Status), Attempt: e.Attempt, At: e.At, Data: e.Data}}
		m := sseMessage{cursor: e.Cursor, job: e.JobID, event: e.Type}
		if ok {
			jj := export.JobJSON(j, "")
			d.Job = &jj
			m.known, m.owner, m.report = true, j.CreatedBy, jj.Report
		}
		data, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", e.ID, err)
		}
		m.data = data
		out = append(out, m)
	}
	return out, nil
}
