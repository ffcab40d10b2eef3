package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sheetq/store"
)

// EnqueueBatch inserts njs in one transaction and answers each in order (store.Driver).
// A group goes in with one INSERT of every row (insertAll); if the server refuses any of
// them, the statement is rolled back whole and the jobs go in one INSERT each. InnoDB
// rolls back only the statement that failed, not the transaction, so a job refused
// alone (a duplicate id, a reused idempotency key, a value the server cannot store) is
// answered with its reason and the others commit. Their "accepted" events (and audit
// entries) go in with them. An error of the whole transaction (BEGIN, COMMIT, a broken
// connection) commits nothing and fails every call; a deadlock runs it again.
func (s *Store) EnqueueBatch(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	out := make([]store.Enqueued, len(njs))
	err := s.tx(ctx, func(w *wtx) error {
		clear(out)
		w.events = nil
		if len(njs) > 1 {
			done, err := s.insertAll(ctx, w, njs, out)
			if err != nil || done {
				return err
			}
		}
		for i, nj := range njs {
			job, existed, err := s.insertJob(ctx, w, nj)
			if err != nil && (isDeadlock(err) || IsUnavailable(err)) {
				return err
			}
			out[i] = store.Enqueued{Job: job, Existed: existed, Err: err}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", unstorable(err))
	}
	return out, nil
}

// insertAll inserts every job of njs PENDING in w with one INSERT, their audit entries
// with one more, reads them back with one SELECT and answers them in out, with their
// "accepted" events: three statements, each one round trip to the server, for the
// group, where insertJob takes two per job. !done: the server refused a row (an id or
// idempotency key in use, also by another job of the group, or a value it cannot
// store), nothing of the group is left in w (a failed statement is rolled back whole,
// and the jobs are deleted again if their audit entries are refused), and the caller
// inserts them one by one to answer each. An error is the transaction's: a deadlock or
// a lost connection.
func (s *Store) insertAll(ctx context.Context, w *wtx, njs []store.NewJob, out []store.Enqueued) (done bool, err error) {
	const row = "(?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.WriteString(`INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at,
		idempotency_key, request_hash, notify_url, created_by, queue) VALUES `)
	args := make([]any, 0, 12*len(njs))
	ids := make([]any, len(njs))
	var audits []store.NewJob
	for i, nj := range njs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
		runAt := w.now
		if !nj.RunAt.IsZero() {
			runAt = nj.RunAt
		}
		args = append(args, nj.ID, nj.Kind, string(nj.Args), nj.Priority, runAt, nj.MaxAttempts, w.now,
			nullString(nj.IdempotencyKey), nullString(nj.RequestHash), nullString(nj.NotifyURL), nullString(nj.CreatedBy), nj.Queue)
		ids[i] = nj.ID
		if nj.Audit != nil {
			audits = append(audits, nj)
		}
	}
	if _, err := w.ExecContext(ctx, b.String(), args...); err != nil {
		if isDeadlock(err) || IsUnavailable(err) {
			return false, err
		}
		return false, nil
	}
	if len(audits) > 0 {
		b.Reset()
		b.WriteString(`INSERT INTO audit_log (at, actor, action, job, report, ip, detail) VALUES `)
		args = args[:0]
		for i, nj := range audits {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			e := nj.Audit
			args = append(args, w.now, e.Actor, e.Action, nj.ID, e.Report, e.IP, e.Detail)
		}
		if _, err := w.ExecContext(ctx, b.String(), args...); err != nil {
			if isDeadlock(err) || IsUnavailable(err) {
				return false, err
			}
			// One entry the server cannot store: take the jobs out again, and let the
			// caller answer each.
			if _, err := w.ExecContext(ctx, `DELETE FROM jobs WHERE id IN (`+placeholders(len(ids))+`)`, ids...); err != nil {
				return false, err
			}
			return false, nil
		}
	}
	jobs, err := queryJobs(ctx, w, `SELECT `+jobColumns+` FROM jobs WHERE id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return false, err
	}
	byID := make(map[string]store.Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
	}
	for i, nj := range njs {
		j, ok := byID[nj.ID]
		if !ok {
			return false, fmt.Errorf("job %s inserted and not read back", nj.ID)
		}
		out[i] = store.Enqueued{Job: j}
		if err := w.event(nj.ID, store.EventAccepted, store.StatusPending, 0, nil); err != nil {
			return false, err
		}
	}
	s.groupInserts.Add(1)
	return true, nil
}

// insertJob inserts nj PENDING in w with its "accepted" event and its audit entry, or
// finds the job its idempotency key already has (existed; ErrIdempotencyMismatch when the
// request hash differs), or answers ErrConflict for an id in use.
func (s *Store) insertJob(ctx context.Context, w *wtx, nj store.NewJob) (store.Job, bool, error) {
	runAt := w.now
	if !nj.RunAt.IsZero() {
		runAt = nj.RunAt
	}
	_, err := w.ExecContext(ctx, `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at,
		idempotency_key, request_hash, notify_url, created_by, queue)
		VALUES (?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		nj.ID, nj.Kind, string(nj.Args), nj.Priority, runAt, nj.MaxAttempts, w.now,
		nullString(nj.IdempotencyKey), nullString(nj.RequestHash), nullString(nj.NotifyURL), nullString(nj.CreatedBy), nj.Queue)
	if isUnique(err) {
		return s.conflicting(ctx, w, nj)
	}
	if err != nil {
		return store.Job{}, false, unstorable(err)
	}
	if e := nj.Audit; e != nil {
		if _, err := w.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, job, report, ip, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			w.now, e.Actor, e.Action, nj.ID, e.Report, e.IP, e.Detail); err != nil {
			// The job's row stays in the transaction: take it out again, so that the job
			// exists if and only if its entry does.
			if _, derr := w.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, nj.ID); derr != nil {
				return store.Job{}, false, derr
			}
			return store.Job{}, false, unstorable(err)
		}
	}
	job, err := reread(ctx, w, nj.ID)
	if err != nil {
		return store.Job{}, false, err
	}
	return job, false, w.event(nj.ID, store.EventAccepted, store.StatusPending, 0, nil)
}

// conflicting answers an insert that a unique index refused: the job its idempotency
// key has, or ErrConflict for its id.
func (s *Store) conflicting(ctx context.Context, w *wtx, nj store.NewJob) (store.Job, bool, error) {
	if nj.IdempotencyKey != "" {
		j, err := scanJob(w.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = ?`, nj.IdempotencyKey))
		switch {
		case err == nil && j.RequestHash != nj.RequestHash:
			return j, true, store.ErrIdempotencyMismatch
		case err == nil:
			return j, true, nil
		case !errors.Is(err, store.ErrNotFound):
			return store.Job{}, false, err
		}
	}
	return store.Job{}, false, fmt.Errorf("job %s: %w", nj.ID, store.ErrConflict)
}
