package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/pg"
)

// sheetqPGVariant is the real engine over store/pg, as a node of several would run it:
// pg.Open with the pool pg.PoolSize gives for its workers, jobs.New with the server's
// defaults (PollInterval 1 s) and Shared set, and a pg.Listener whose Ready and Cancel
// wake the engine (WakeQueue, CheckCancel): a job enqueued on another node starts on
// its notification, not on the poll.
type sheetqPGVariant struct{ workers int }

func (sheetqPGVariant) name() string { return "sheetq-pg" }

// pgSink is what the benchmark sees of every node's handlers: starts and completions.
type pgSink struct {
	track   bool
	started chan time.Time // each handler start, when track is set
	handled atomic.Int64   // handlers returned
	changed chan struct{}  // some engine committed something (OnChange), coalesced
}

func newPGSink(track bool) *pgSink {
	return &pgSink{track: track, started: make(chan time.Time, 1), changed: make(chan struct{}, 1)}
}

// sheetqNode is one node: a store (its own pool), an engine and a listener.
type sheetqNode struct {
	st  *store.Store
	e   *jobs.Engine
	l   *pg.Listener
	dir string
}

// newSheetqNode opens a node on dsn; with workers 0 it has a store only (a node that
// accepts requests and runs no jobs).
func newSheetqNode(ctx context.Context, dsn string, i, workers int, sink *pgSink) (*sheetqNode, error) {
	st, err := pg.Open(ctx, dsn, pg.Options{MaxConns: pg.PoolSize(workers)})
	if err != nil {
		return nil, err
	}
	n := &sheetqNode{st: st}
	if workers == 0 {
		return n, nil
	}
	// The engine's default poll: the listener wakes it.
	if n.e, n.dir, err = startEngine(ctx, st, i, workers, sink, 0); err != nil {
		st.Close()
		return nil, err
	}
	n.l, err = pg.Listen(ctx, dsn, slog.New(slog.NewTextHandler(io.Discard, nil)), pg.Callbacks{Ready: n.e.WakeQueue, Cancel: n.e.CheckCancel})
	if err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// startEngine starts node i's engine on st with workers workers, a no-op handler that
// reports to sink, Shared set and poll as its PollInterval (0: the default), in a
// temporary directory of its own, which it returns for the caller to remove.
func startEngine(ctx context.Context, st *store.Store, i, workers int, sink *pgSink, poll time.Duration) (*jobs.Engine, string, error) {
	dir, err := os.MkdirTemp("", "riverbench-node-")
	if err != nil {
		return nil, "", err
	}
	cfg := jobs.Defaults()
	cfg.Workers = workers
	cfg.Shared = true
	if poll > 0 {
		cfg.PollInterval = poll
	}
	cfg.WorkerID = fmt.Sprintf("node-%d", i)
	cfg.TmpDir, cfg.ExportsDir = dir+"/tmp", dir+"/exports"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.OnChange = func() {
		select {
		case sink.changed <- struct{}{}:
		default:
		}
	}
	e := jobs.New(st, cfg)
	e.Register(noopKind, jobs.HandlerFunc(func(context.Context, *jobs.Run) error {
		if sink.track {
			sink.started <- time.Now()
		}
		sink.handled.Add(1)
		return nil
	}))
	if err := e.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return e, dir, nil
}

func (n *sheetqNode) close() {
	if n.l != nil {
		n.l.Stop()
	}
	if n.e != nil {
		n.e.Stop()
	}
	n.st.Close()
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
}

// waitSucceededPG waits until n jobs are SUCCEEDED. It counts them only once n handlers
// have returned, and again on each change after that, so that the reads do not slow the
// run they measure.
func waitSucceededPG(ctx context.Context, dsn string, sink *pgSink, n int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.After(waitTimeout)
	for {
		if sink.handled.Load() >= int64(n) {
			var done int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'SUCCEEDED'`).Scan(&done); err != nil {
				return err
			}
			if done >= n {
				return nil
			}
		}
		select {
		case <-sink.changed:
		case <-deadline:
			return fmt.Errorf("timed out waiting for %d jobs to succeed (%d handled)", n, sink.handled.Load())
		}
	}
}

func (v sheetqPGVariant) enqueue(ctx context.Context, dsn string, n, callers int) (time.Duration, error) {
	node, err := newSheetqNode(ctx, dsn, 0, 0, nil)
	if err != nil {
		return 0, err
	}
	defer node.close()
	t0 := time.Now()
	err = fanOut(n, callers, func(int) error {
		_, _, err := node.st.Enqueue(ctx, newJob())
		return err
	})
	return time.Since(t0), err
}

func (v sheetqPGVariant) endToEnd(ctx context.Context, dsn string, n, callers, nodes int) (time.Duration, error) {
	sink := newPGSink(false)
	var ns []*sheetqNode
	defer func() {
		for _, node := range ns {
			node.close()
		}
	}()
	for i := range nodes {
		node, err := newSheetqNode(ctx, dsn, i, v.workers, sink)
		if err != nil {
			return 0, err
		}
		ns = append(ns, node)
	}
	t0 := time.Now()
	// Through each node's engine, as its API would: Enqueue also wakes the local lane.
	if err := fanOut(n, callers, func(i int) error {
		_, _, err := ns[i%len(ns)].e.Enqueue(ctx, newJob())
		return err
	}); err != nil {
		return 0, err
	}
	if err := waitSucceededPG(ctx, dsn, sink, n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v sheetqPGVariant) pickup(ctx context.Context, dsn string, rounds int) ([]time.Duration, error) {
	sink := newPGSink(true)
	a, err := newSheetqNode(ctx, dsn, 0, 0, nil)
	if err != nil {
		return nil, err
	}
	defer a.close()
	b, err := newSheetqNode(ctx, dsn, 1, v.workers, sink)
	if err != nil {
		return nil, err
	}
	defer b.close()
	var last string
	return pickupRounds(rounds, func() error {
		j, _, err := a.st.Enqueue(ctx, newJob())
		last = j.ID
		return err
	}, sink.started, func(i int) error { return waitJobSucceeded(ctx, a.st, sink, last, i) })
}

// waitJobSucceeded waits until job id is SUCCEEDED, reading it (through st's pool, whose
// connections are open already) once n handlers have returned and again on each change.
// A pickup round waits like this, not with waitSucceededPG: that opens a connection and
// counts the whole table, and the new backend's start and exit, a few milliseconds of
// CPU on a 2-core machine, overlapped the next round's pickup and inflated what it
// measured (River's variant waits on its in-process completion events).
func waitJobSucceeded(ctx context.Context, st *store.Store, sink *pgSink, id string, n int) error {
	deadline := time.After(waitTimeout)
	for {
		if sink.handled.Load() >= int64(n) {
			j, err := st.Get(ctx, id)
			if err != nil {
				return err
			}
			if j.Status == store.StatusSucceeded {
				return nil
			}
		}
		select {
		case <-sink.changed:
		case <-deadline:
			return fmt.Errorf("timed out waiting for job %s to succeed (%d handled)", id, sink.handled.Load())
		}
	}
}

// pickupRounds runs one warm-up round (untimed: the first job meets cold connections
// and plans) and then rounds timed ones: after an idle gap, enqueue, then the time to the
// next handler start; each round ends once its job is committed as completed
// (completed(i) waits for the first i), so that the next starts on an idle node.
func pickupRounds(rounds int, enqueue func() error, started <-chan time.Time, completed func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, rounds)
	for i := range rounds + 1 {
		time.Sleep(idleGap())
		if err := enqueue(); err != nil {
			return nil, err
		}
		t1 := time.Now()
		select {
		case t2 := <-started:
			if i > 0 {
				out = append(out, t2.Sub(t1))
			}
		case <-time.After(waitTimeout):
			return nil, errors.New("timed out waiting for the handler to start")
		}
		if err := completed(i + 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}
