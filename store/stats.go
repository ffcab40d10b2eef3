package store

import "time"

// KindStats is a point-in-time view of the jobs of one kind.
type KindStats struct {
	// Counts holds the number of jobs in each state, every state present (0 when none).
	Counts map[Status]int
	// OldestPendingRunAt is the run_at of the oldest runnable PENDING job (the time it
	// became runnable); zero when no job is waiting.
	OldestPendingRunAt time.Time
	// LateHeartbeats counts PROCESSING jobs whose heartbeat is older than the lateBefore
	// given to QueueStats.
	LateHeartbeats int
}

// AllStatuses lists every job state, in the order of the state machine.
var AllStatuses = []Status{StatusPending, StatusProcessing, StatusSucceeded, StatusFailed, StatusCanceled, StatusExpired}

// StallReason says why a running job looks stalled.
type StallReason string

// The reasons StalledJobs gives.
const (
	// StallLateHeartbeat: the heartbeat is older than the late threshold (the worker is
	// hung or gone; the reaper recovers the job once it is older than stale_after).
	StallLateHeartbeat StallReason = "late_heartbeat"
	// StallNoRows: the attempt has run longer than the quiet threshold without a row.
	StallNoRows StallReason = "no_rows"
)

// StalledJob is a running job that looks stuck, and why.
type StalledJob struct {
	Job    Job
	Reason StallReason
}

// ThroughputBucket counts the jobs that finished in [Start, Start+width).
type ThroughputBucket struct {
	Start time.Time
	// Succeeded includes jobs since EXPIRED: they succeeded, and retention removed the file.
	Succeeded, Failed, Canceled int
}

// Percentiles summarises a set of durations; P50 and P95 are nearest-rank percentiles,
// zero when Count is 0.
type Percentiles struct {
	// Count is how many durations were looked at: at most the sample limit.
	Count    int
	P50, P95 time.Duration
}

// DurationStats are the wait and run times of recent jobs.
type DurationStats struct {
	// Wait is started_at - created_at (acceptance to the start of the latest attempt)
	// of the jobs whose latest attempt started since the window's start.
	Wait Percentiles
	// Run is finished_at - started_at (the final attempt) of the jobs that succeeded or
	// failed since the window's start. Cancelled jobs are left out: a job cancelled
	// while it waited for a retry has a started_at from an earlier attempt.
	Run Percentiles
}

// Transition is one job event with the times of its job that the metrics need.
type Transition struct {
	EventID   int64
	JobID     string
	Kind      string
	Type      string
	Status    Status
	Attempt   int
	At        time.Time
	CreatedAt time.Time
	// StartedAt is the job's started_at when read: for a final event, the start of the
	// final attempt. Zero when the job never started.
	StartedAt time.Time
	// Code is the error code the event carries, if any ("lost" for a recovery).
	Code string
}
