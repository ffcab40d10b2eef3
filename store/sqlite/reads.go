package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// readStmts are the reads that run many times a second, prepared once on the reader
// pool. The event hub reads new events and their jobs up to a hundred times a second
// while exports are accepted, and every page and API call reads a job by id: parsing
// their SQL each time was a tenth of the server's CPU in a burst (BENCHMARKS.md,
// "Prepared reads"), CPU that the requests being accepted need. database/sql prepares a
// statement on each pooled connection the first time it runs there.
type readStmts struct {
	get, eventsAfter, jobEventsAfter, jobEvents, jobsByID *sql.Stmt
	// nextRun is NextRunIn's, which a lane's dispatcher asks after every claim that left
	// slots free: once per job when jobs come one at a time (BENCHMARKS.md, "One commit
	// for every write").
	nextRun *sql.Stmt
}

const (
	getSQL            = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
	eventsAfterSQL    = `SELECT ` + eventColumns + ` FROM job_events WHERE id > ? ORDER BY id LIMIT ?`
	jobEventsAfterSQL = `SELECT ` + eventColumns + ` FROM job_events WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?`
	jobEventsSQL      = `SELECT ` + eventColumns + ` FROM job_events WHERE job_id = ? ORDER BY id`
	jobsByIDSQL       = `SELECT ` + jobColumns + ` FROM jobs WHERE id IN (SELECT value FROM json_each(?))`
	nextRunSQL        = `SELECT min(run_at) FROM jobs WHERE status = 'PENDING' AND queue = ?`
)

func (rs *readStmts) prepare(ctx context.Context, r *sql.DB) error {
	return prepareEach(ctx, r, []toPrepare{
		{&rs.get, getSQL}, {&rs.eventsAfter, eventsAfterSQL}, {&rs.jobEventsAfter, jobEventsAfterSQL},
		{&rs.jobEvents, jobEventsSQL}, {&rs.jobsByID, jobsByIDSQL}, {&rs.nextRun, nextRunSQL},
	})
}

// toPrepare is a statement to prepare and where to keep it.
type toPrepare struct {
	stmt **sql.Stmt
	sql  string
}

// prepareEach prepares every statement of ps on db.
func prepareEach(ctx context.Context, db *sql.DB, ps []toPrepare) error {
	for _, p := range ps {
		var err error
		if *p.stmt, err = db.PrepareContext(ctx, p.sql); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}
