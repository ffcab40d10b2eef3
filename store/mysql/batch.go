package mysql

import (
	"context"
	"errors"
	"fmt"

	"sheetq/store"
)

// EnqueueBatch inserts njs in one transaction, one INSERT each, and answers each in order
// (store.Driver). InnoDB rolls back only the statement that failed, not the
// transaction, so a job refused alone (a duplicate id, a reused idempotency key, a value
// the server cannot store) is answered with its reason and the others commit. Their
// "accepted" events (and audit entries) go in with them. An error of the whole
// transaction (BEGIN, COMMIT, a broken connection) commits nothing and fails every call;
// a deadlock runs it again.
func (s *Store) EnqueueBatch(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	out := make([]store.Enqueued, len(njs))
	err := s.tx(ctx, func(w *wtx) error {
		clear(out)
		w.events = nil
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
