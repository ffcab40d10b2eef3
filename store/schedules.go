package store

import (
	"encoding/json"
	"errors"
	"time"
)

// Schedule is one row of the schedules table (issue 20): an export that runs on a cron
// expression. The store keeps Params and Deliver as given and never reads them; the
// firing loop (jobs/schedule for the time arithmetic) computes NextRunAt.
type Schedule struct {
	ID     string
	Report string
	// Params are the report's parameters as given: literal values and relative dates.
	Params json.RawMessage
	// Format is the file's format ("xlsx" or "csv"; "" stores xlsx) and BOM its byte
	// order mark (csv).
	Format string
	BOM    bool
	// Cron is a five-field cron expression, read in TimeZone (an IANA name).
	Cron, TimeZone string
	// Deliver is where each firing's file goes, opaque to the store; nil: nowhere.
	Deliver json.RawMessage
	// Owner names the access token that created the schedule ("" when none).
	Owner  string
	Paused bool
	// NextRunAt is the schedule's next firing; zero while it is paused.
	NextRunAt time.Time
	// LastFiredFor is the scheduled time of its last firing; zero when it never fired.
	LastFiredFor time.Time
	// CreatedAt and UpdatedAt are stamped by the store's clock.
	CreatedAt, UpdatedAt time.Time
}

// Firing is one firing of a schedule, for FireSchedule.
type Firing struct {
	ScheduleID string
	// Due is the schedule's NextRunAt as the firing node read it: the firing happens
	// only while it is still that, so two nodes that read the same due schedule fire it
	// once, and an edit in between (a new cron, a pause) wins.
	Due time.Time
	// ScheduledFor is the firing's time (Due, or the latest missed one when catching up),
	// and Next is the schedule's next firing after it.
	ScheduledFor, Next time.Time
	// Job is the export to enqueue; its IdempotencyKey names (schedule, ScheduledFor).
	Job NewJob
}

// FiringKey is the idempotency key of the export that fires schedule id for the time at:
// one job per (schedule, scheduled time), on every node (ARCHITECTURE.md, schedules).
// The time is RFC 3339 in UTC, fixed width, so the keys of one schedule sort by time.
func FiringKey(id string, at time.Time) string {
	return firingKeyPrefix(id) + at.UTC().Format(time.RFC3339)
}

func firingKeyPrefix(id string) string { return "schedule:" + id + ":" }

// ClientKey is the idempotency key under which a client's Idempotency-Key header (or the
// form's hidden key) is stored: "client:" and the key. Firings use "schedule:"
// (FiringKey), so no request, whatever key it sends, can take a firing's place
// (ARCHITECTURE.md, schedules; migrations 0012 and pg 0010 moved the keys stored before).
func ClientKey(key string) string { return "client:" + key }

// FiringKeyRange is the range of idempotency keys that FiringKey makes for schedule id:
// every one is greater than lo and less than hi, in byte order.
func FiringKeyRange(id string) (lo, hi string) {
	lo = firingKeyPrefix(id)
	return lo, lo[:len(lo)-1] + ";" // ';' follows ':'
}

// ErrScheduleInvalid is returned for a schedule the store cannot keep.
var ErrScheduleInvalid = errors.New("schedule: id, report, params, cron and timezone are required")

// FiringsLimit is ScheduleFirings' limit with its default (50) and bound (1,000) applied.
func FiringsLimit(n int) int {
	if n <= 0 {
		return 50
	}
	return min(n, 1000)
}

// CheckSchedule refuses a schedule no driver may store: one without an id, a report,
// parameters, a cron expression or a time zone.
func CheckSchedule(sc Schedule) error {
	if sc.ID == "" || sc.Report == "" || len(sc.Params) == 0 || sc.Cron == "" || sc.TimeZone == "" {
		return ErrScheduleInvalid
	}
	return nil
}
