package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The channels migration 0003's triggers notify on. Payloads are ids, never job data.
const (
	// ChannelReady carries a queue name: a job of it became PENDING.
	ChannelReady = "sheetq_ready"
	// ChannelCancel carries a job id: a cancel was requested while it ran.
	ChannelCancel = "sheetq_cancel"
	// ChannelEvents has an empty payload: events were appended.
	ChannelEvents = "sheetq_events"
)

// Callbacks are what a Listener calls for each notification. They run on the
// listener's goroutine and must not block: a wake-up that only sets a pending flag
// (jobs.Engine.WakeQueue, jobs.Engine.CheckCancel, the event hub's Notify) is what they
// are for. A nil callback is skipped.
//
// After every (re)connection each callback is called once with the empty string (Events
// with nothing): notifications sent while the connection was down are lost, so the
// receiver reads the table again (every lane claims, every running job checks its
// cancel flag, the hub reads after its cursor).
type Callbacks struct {
	// Ready: a job of queue became PENDING, to run now or later; "": any queue.
	Ready func(queue string)
	// Cancel: a cancel was requested for job id while it was PROCESSING; "": any job.
	Cancel func(id string)
	// Events: events were appended to the log.
	Events func()
}

// Timings of a Listener.
const (
	// listenCheckEvery is how long the connection may stay silent before a ping checks
	// that it is alive: a connection dropped without a word (a network partition, a
	// killed host) gives no error until TCP gives up, which takes minutes.
	listenCheckEvery = 30 * time.Second
	// listenPingTimeout bounds that ping and a connection attempt.
	listenPingTimeout = 5 * time.Second
	// Reconnection waits double from listenRetryMin up to listenRetryMax.
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Listener holds one connection of its own that LISTENs on the channels and calls
// Callbacks, reconnecting with backoff when the connection is lost. Its connection is
// not the pool's: LISTEN is session state, which a pooled connection cannot keep, and a
// wake-up must not wait for a free worker connection. A connection pooler in
// transaction mode cannot carry LISTEN at all (Options.PollOnly: start no Listener).
type Listener struct {
	cfg  *pgx.ConnConfig
	log  *slog.Logger
	cb   Callbacks
	hook listenHooks

	mu   sync.Mutex
	conn *pgx.Conn // the connection now, for tests (hooks.pid)

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// listenHooks are test seams (notify_export_test.go).
type listenHooks struct {
	// beforeReconnect runs after a lost connection, before the first try to connect
	// again: a test holds the listener down there.
	beforeReconnect func()
}

// Listen connects to dsn (the same as the store's), LISTENs on every channel, and calls
// cb for each notification until Stop. The first connection is made before it returns,
// so a DSN that cannot connect is an error; later losses are logged and retried.
func Listen(ctx context.Context, dsn string, log *slog.Logger, cb Callbacks) (*Listener, error) {
	return listen(ctx, dsn, log, cb, listenHooks{})
}

func listen(ctx context.Context, dsn string, log *slog.Logger, cb Callbacks, hook listenHooks) (*Listener, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Shown in pg_stat_activity, so that an operator tells it from the pool's connections.
	cfg.RuntimeParams["application_name"] = "sheetq listen"
	if log == nil {
		log = slog.Default()
	}
	l := &Listener{cfg: cfg, log: log, cb: cb, hook: hook, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	log.InfoContext(ctx, "listening for wake-ups from other nodes", "channels", []string{ChannelReady, ChannelCancel, ChannelEvents})
	// Before returning, so that a caller that starts its engine next finds the re-read's
	// wake-ups already pending.
	l.reread()
	var rctx context.Context
	rctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go l.run(rctx, conn)
	return l, nil
}

// Stop closes the connection and waits for the listener's goroutine. It is idempotent.
func (l *Listener) Stop() {
	l.stopOnce.Do(func() {
		l.cancel()
		<-l.done
	})
}

// connect opens the connection and LISTENs on every channel. Only then does the caller
// re-read (reread): a change committed after LISTEN is notified, one committed before is
// in the table.
func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return nil, err
	}
	for _, ch := range []string{ChannelReady, ChannelCancel, ChannelEvents} {
		if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	l.mu.Lock()
	l.conn = conn
	l.mu.Unlock()
	return conn, nil
}

// run receives notifications on conn until it fails, then reconnects with backoff,
// re-reading after each connection, until ctx ends.
func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		err := l.receive(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), listenPingTimeout)
		conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		lost := time.Now()
		l.log.WarnContext(ctx, "listen connection lost; wake-ups from other nodes wait for the poll until it is back", "err", err)
		if l.hook.beforeReconnect != nil {
			l.hook.beforeReconnect()
		}
		var tries int
		conn, tries = l.reconnect(ctx)
		if conn == nil {
			return // stopped
		}
		l.log.InfoContext(ctx, "listen connection back", "down_for", time.Since(lost).Round(time.Millisecond), "tries", tries)
		l.reread()
	}
}

// reconnect connects again, waiting longer after each failure, until it succeeds (the
// connection and how many tries it took) or ctx ends (nil).
func (l *Listener) reconnect(ctx context.Context) (*pgx.Conn, int) {
	wait := listenRetryMin
	for tries := 1; ; tries++ {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, tries
		case <-t.C:
		}
		conn, err := l.connect(ctx)
		if err == nil {
			return conn, tries
		}
		if ctx.Err() != nil {
			return nil, tries
		}
		l.log.DebugContext(ctx, "listen: reconnect failed", "tries", tries, "err", err)
		wait = min(2*wait, listenRetryMax)
	}
}

// receive dispatches conn's notifications until the connection fails (its error) or
// ctx ends. A silent connection is pinged every listenCheckEvery: an error is the
// only sign that a dropped connection gives.
func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, listenCheckEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Silence: a timeout leaves a pgx connection usable; ask it.
			pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		case err != nil:
			return err
		}
		l.dispatch(n.Channel, n.Payload)
	}
}

// dispatch calls the callback of one notification.
func (l *Listener) dispatch(channel, payload string) {
	switch {
	case channel == ChannelReady && l.cb.Ready != nil:
		if payload != "" { // "" is the re-read's: every queue, which no trigger sends
			l.cb.Ready(payload)
		}
	case channel == ChannelCancel && l.cb.Cancel != nil:
		if payload != "" {
			l.cb.Cancel(payload)
		}
	case channel == ChannelEvents && l.cb.Events != nil:
		l.cb.Events()
	}
}

// reread calls every callback once for "anything": what was notified while no
// connection listened is lost, so the receivers read the table again.
func (l *Listener) reread() {
	if l.cb.Ready != nil {
		l.cb.Ready("")
	}
	if l.cb.Cancel != nil {
		l.cb.Cancel("")
	}
	if l.cb.Events != nil {
		l.cb.Events()
	}
}
