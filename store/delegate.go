package store

import (
	"context"
	"encoding/json"
	"time"
)

// The operations the core has no rule for: the driver answers, and its errors get their
// kind (Store.fault).

// Ping: Driver.Ping.
func (s *Store) Ping(ctx context.Context) error {
	return s.fault(s.d.Ping(ctx))
}

// ProbeWrite: Driver.ProbeWrite.
func (s *Store) ProbeWrite(ctx context.Context) error {
	return s.fault(s.d.ProbeWrite(ctx))
}

// NextRunIn: Driver.NextRunIn.
func (s *Store) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	r0, err := s.d.NextRunIn(ctx, queue)
	return r0, s.fault(err)
}

// Heartbeat: Driver.Heartbeat.
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error) {
	r0, err := s.d.Heartbeat(ctx, id, attempt, rows, total)
	return r0, s.fault(err)
}

// Checkpoint: Driver.Checkpoint.
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	r0, err := s.d.Checkpoint(ctx, id)
	return r0, s.fault(err)
}

// CompleteFromFile: Driver.CompleteFromFile.
func (s *Store) CompleteFromFile(ctx context.Context, id string, attempt int, res FileResult) (Job, error) {
	r0, err := s.d.CompleteFromFile(ctx, id, attempt, res)
	return r0, s.fault(err)
}

// Recover: Driver.Recover.
func (s *Store) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (Job, error) {
	r0, err := s.d.Recover(ctx, id, attempt, reason, retryIn)
	return r0, s.fault(err)
}

// Stale: Driver.Stale.
func (s *Store) Stale(ctx context.Context, staleAfter time.Duration) ([]Job, error) {
	r0, err := s.d.Stale(ctx, staleAfter)
	return r0, s.fault(err)
}

// Cancel: Driver.Cancel.
func (s *Store) Cancel(ctx context.Context, id string) (Job, error) {
	r0, err := s.d.Cancel(ctx, id)
	return r0, s.fault(err)
}

// Expire: Driver.Expire.
func (s *Store) Expire(ctx context.Context, id string) (Job, error) {
	r0, err := s.d.Expire(ctx, id)
	return r0, s.fault(err)
}

// Delete: Driver.Delete.
func (s *Store) Delete(ctx context.Context, id string) (Job, error) {
	r0, err := s.d.Delete(ctx, id)
	return r0, s.fault(err)
}

// AppendEvent: Driver.AppendEvent.
func (s *Store) AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error {
	return s.fault(s.d.AppendEvent(ctx, id, typ, data))
}

// Get: Driver.Get.
func (s *Store) Get(ctx context.Context, id string) (Job, error) {
	r0, err := s.d.Get(ctx, id)
	return r0, s.fault(err)
}

// Counts: Driver.Counts.
func (s *Store) Counts(ctx context.Context) (map[Status]int, error) {
	r0, err := s.d.Counts(ctx)
	return r0, s.fault(err)
}

// JobsByID: Driver.JobsByID.
func (s *Store) JobsByID(ctx context.Context, ids []string) (map[string]Job, error) {
	r0, err := s.d.JobsByID(ctx, ids)
	return r0, s.fault(err)
}

// Unfinished: Driver.Unfinished.
func (s *Store) Unfinished(ctx context.Context) ([]Job, error) {
	r0, err := s.d.Unfinished(ctx)
	return r0, s.fault(err)
}

// FinishedOlderThan: Driver.FinishedOlderThan.
func (s *Store) FinishedOlderThan(ctx context.Context, statuses []Status, age time.Duration, limit int) ([]Job, error) {
	r0, err := s.d.FinishedOlderThan(ctx, statuses, age, limit)
	return r0, s.fault(err)
}

// PendingHead: Driver.PendingHead.
func (s *Store) PendingHead(ctx context.Context, queue, kind string, limit int) ([]Job, error) {
	r0, err := s.d.PendingHead(ctx, queue, kind, limit)
	return r0, s.fault(err)
}

// PendingByQueue: Driver.PendingByQueue.
func (s *Store) PendingByQueue(ctx context.Context) (map[string]int, error) {
	r0, err := s.d.PendingByQueue(ctx)
	return r0, s.fault(err)
}

// QueueStats: Driver.QueueStats.
func (s *Store) QueueStats(ctx context.Context, now, lateBefore time.Time, kinds ...string) (map[string]KindStats, error) {
	r0, err := s.d.QueueStats(ctx, now, lateBefore, kinds...)
	return r0, s.fault(err)
}

// StalledJobs: Driver.StalledJobs.
func (s *Store) StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]StalledJob, int, error) {
	r0, r1, err := s.d.StalledJobs(ctx, kind, lateBefore, quietBefore, limit)
	return r0, r1, s.fault(err)
}

// Throughput: Driver.Throughput.
func (s *Store) Throughput(ctx context.Context, kind string, now time.Time, width time.Duration, n int) ([]ThroughputBucket, error) {
	r0, err := s.d.Throughput(ctx, kind, now, width, n)
	return r0, s.fault(err)
}

// Durations: Driver.Durations.
func (s *Store) Durations(ctx context.Context, kind string, since time.Time) (DurationStats, error) {
	r0, err := s.d.Durations(ctx, kind, since)
	return r0, s.fault(err)
}

// Events: Driver.Events.
func (s *Store) Events(ctx context.Context, jobID string) ([]Event, error) {
	r0, err := s.d.Events(ctx, jobID)
	return r0, s.fault(err)
}

// EventHead: Driver.EventHead.
func (s *Store) EventHead(ctx context.Context) (string, error) {
	r0, err := s.d.EventHead(ctx)
	return r0, s.fault(err)
}

// EventsKept: Driver.EventsKept.
func (s *Store) EventsKept(ctx context.Context, cursor string) (bool, error) {
	r0, err := s.d.EventsKept(ctx, cursor)
	return r0, s.fault(err)
}

// GetSchedule: Driver.GetSchedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (Schedule, error) {
	r0, err := s.d.GetSchedule(ctx, id)
	return r0, s.fault(err)
}

// ListSchedules: Driver.ListSchedules.
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	r0, err := s.d.ListSchedules(ctx)
	return r0, s.fault(err)
}

// MoveSchedule: Driver.MoveSchedule.
func (s *Store) MoveSchedule(ctx context.Context, id string, from, next time.Time) (moved bool, err error) {
	r0, err := s.d.MoveSchedule(ctx, id, from, next)
	return r0, s.fault(err)
}

// DeleteSchedule: Driver.DeleteSchedule.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.fault(s.d.DeleteSchedule(ctx, id))
}

// DueSchedules: Driver.DueSchedules.
func (s *Store) DueSchedules(ctx context.Context, limit int) ([]Schedule, error) {
	r0, err := s.d.DueSchedules(ctx, limit)
	return r0, s.fault(err)
}
