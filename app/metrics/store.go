package metrics

import (
	"context"
	"time"

	"sheetq/store"
)

// Store is what the metrics and the stats page read of the job table: *store.Store
// (SQLite) and *pg.Store (PostgreSQL) both serve it (ARCHITECTURE.md, "PostgreSQL").
type Store interface {
	Now() time.Time
	PendingByQueue(ctx context.Context) (map[string]int, error)
	QueueStats(ctx context.Context, now, lateBefore time.Time, kinds ...string) (map[string]store.KindStats, error)
	StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]store.StalledJob, int, error)
	Throughput(ctx context.Context, kind string, now time.Time, width time.Duration, n int) ([]store.ThroughputBucket, error)
	Durations(ctx context.Context, kind string, since time.Time) (store.DurationStats, error)
	BatchStats() store.BatchStats
	// EventHead and TransitionsSince tail the job event log by the store's cursor.
	EventHead(ctx context.Context) (string, error)
	TransitionsSince(ctx context.Context, cursor string, limit int) ([]store.Transition, string, error)
}
