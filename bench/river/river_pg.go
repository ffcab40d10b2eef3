package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverPGVariant is River with its pgx driver, one client per node, each on a pool of
// its own. River's notifier takes one connection out of the pool for LISTEN, so its pool
// is one bigger than sheetq's (whose Listener connects outside the pool): both have the
// same number of connections for work. Zero cooldown and poll leave River's defaults
// (FetchCooldown 100 ms, FetchPollInterval 1 s).
type riverPGVariant struct {
	label          string
	workers        int
	cooldown, poll time.Duration
}

func (v riverPGVariant) name() string { return v.label }

// riverPGNode is one River client and its pool.
type riverPGNode struct {
	pool      *pgxpool.Pool
	client    *river.Client[pgx.Tx]
	completed <-chan *river.Event
	cancelSub func()
	running   bool
}

// newRiverPGNode makes a node; workers 0 is an insert-only client (it runs no jobs).
// subscribe is how many completion events its channel must hold.
func (v riverPGVariant) newNode(ctx context.Context, dsn string, workers, subscribe int, started chan<- time.Time) (*riverPGNode, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(max(workers, 1) + 2 + 4 + 1) // sheetq's pg.PoolSize(workers), plus River's LISTEN
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n := &riverPGNode{pool: pool}
	config := &river.Config{
		FetchCooldown:     v.cooldown,
		FetchPollInterval: v.poll,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if workers > 0 {
		ws := river.NewWorkers()
		river.AddWorker(ws, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
			if started != nil {
				started <- time.Now()
			}
			return nil
		}))
		config.Workers = ws
		config.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
	}
	if n.client, err = river.NewClient(riverpgxv5.New(pool), config); err != nil {
		pool.Close()
		return nil, err
	}
	if workers == 0 {
		return n, nil
	}
	// River drops events when a subscriber's channel is full, so the channel holds every
	// completion of the run.
	n.completed, n.cancelSub = n.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: subscribe + 16,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	if err := n.client.Start(ctx); err != nil {
		n.close()
		return nil, err
	}
	n.running = true
	return n, nil
}

func (n *riverPGNode) close() {
	if n.running {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n.client.Stop(ctx)
	}
	if n.cancelSub != nil {
		n.cancelSub()
	}
	n.pool.Close()
}

// migrateRiver creates River's tables in the schema dsn names.
func migrateRiver(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	return nil
}

// waitRiverCompleted waits for n completion events over every node. River sends them
// after its completer has committed the batch that holds the job.
func waitRiverCompleted(nodes []*riverPGNode, n int) error {
	deadline := time.After(waitTimeout)
	merged := make(chan struct{}, n)
	stop := make(chan struct{})
	defer close(stop)
	for _, node := range nodes {
		go func() {
			for {
				select {
				case ev, ok := <-node.completed:
					if !ok {
						return
					}
					if ev.Kind == river.EventKindJobCompleted {
						merged <- struct{}{}
					}
				case <-stop:
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case <-merged:
		case <-deadline:
			return fmt.Errorf("timed out waiting for %d completions (%d seen)", n, i)
		}
	}
	return nil
}

func (v riverPGVariant) enqueue(ctx context.Context, dsn string, n, callers int) (time.Duration, error) {
	if err := migrateRiver(ctx, dsn); err != nil {
		return 0, err
	}
	node, err := v.newNode(ctx, dsn, 0, 0, nil)
	if err != nil {
		return 0, err
	}
	defer node.close()
	t0 := time.Now()
	err = fanOut(n, callers, func(int) error {
		_, err := node.client.Insert(ctx, noopArgs{}, nil)
		return err
	})
	return time.Since(t0), err
}

func (v riverPGVariant) endToEnd(ctx context.Context, dsn string, n, callers, nodes int) (time.Duration, error) {
	if err := migrateRiver(ctx, dsn); err != nil {
		return 0, err
	}
	var ns []*riverPGNode
	defer func() {
		for _, node := range ns {
			node.close()
		}
	}()
	for range nodes {
		node, err := v.newNode(ctx, dsn, v.workers, n, nil)
		if err != nil {
			return 0, err
		}
		ns = append(ns, node)
	}
	t0 := time.Now()
	if err := fanOut(n, callers, func(i int) error {
		_, err := ns[i%len(ns)].client.Insert(ctx, noopArgs{}, nil)
		return err
	}); err != nil {
		return 0, err
	}
	// Any node may run any job: the completions are counted over all of them.
	if err := waitRiverCompleted(ns, n); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (v riverPGVariant) pickup(ctx context.Context, dsn string, rounds int) ([]time.Duration, error) {
	if err := migrateRiver(ctx, dsn); err != nil {
		return nil, err
	}
	a, err := v.newNode(ctx, dsn, 0, 0, nil)
	if err != nil {
		return nil, err
	}
	defer a.close()
	started := make(chan time.Time, 1)
	b, err := v.newNode(ctx, dsn, v.workers, rounds+1, started)
	if err != nil {
		return nil, err
	}
	defer b.close()
	done := 0
	return pickupRounds(rounds, func() error {
		_, err := a.client.Insert(ctx, noopArgs{}, nil)
		return err
	}, started, func(i int) error {
		if err := waitRiverCompleted([]*riverPGNode{b}, i-done); err != nil {
			return err
		}
		done = i
		return nil
	})
}

var errNoPG = errors.New("the PostgreSQL variants need -pg DSN")
