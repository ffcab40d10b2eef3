package exports

import (
	"context"

	"sheetq/app/metrics"
	"sheetq/jobs"
	"sheetq/store"
)

// Store is what the API and the pages need of the job table: the engine's jobs.Store,
// the reads behind the lists, the detail pages and the probes, and the stats page's
// (metrics.Store). *store.Store (SQLite,
// the default) and *pg.Store (PostgreSQL, --store) both serve it (ARCHITECTURE.md,
// "PostgreSQL").
type Store interface {
	jobs.Store
	metrics.Store
	Get(ctx context.Context, id string) (store.Job, error)
	List(ctx context.Context, o store.ListOptions) ([]store.Job, error)
	Counts(ctx context.Context) (map[store.Status]int, error)
	// PendingHead is a queue's first PENDING jobs of a kind, in claim order.
	PendingHead(ctx context.Context, queue, kind string, limit int) ([]store.Job, error)
	Events(ctx context.Context, jobID string) ([]store.Event, error)
	// Ping says the store answers (GET /healthz).
	Ping(ctx context.Context) error
	// ProbeWrite says the store takes writes (GET /readyz).
	ProbeWrite(ctx context.Context) error
}
