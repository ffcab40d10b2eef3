package jobs

import "time"

// faultPoint is where a crash test may kill the process (named points such as
// "after-rename"). It does nothing unless the binary is built with -tags faultpoints.
var faultPoint = func(string) {}

// faultsArmed is set when SHEETQ_FAULT arms a point (fault_on.go), so that a point which
// needs set-up, such as mid-batch-end's wrapper, costs nothing otherwise.
var faultsArmed bool

// clockOffset is how far a crash test sets this node's own clock off
// (SHEETQ_TEST_CLOCK_OFFSET, read by fault_on.go); zero in production builds.
var clockOffset time.Duration

// FaultClockOffset is the offset a crash test gave this node's own clock (the engine's
// and the janitor's Now), to show that the database clock, not a node's, decides
// staleness and backoff on a shared store. Always zero without -tags faultpoints.
func FaultClockOffset() time.Duration { return clockOffset }

// testPartSize is the multipart part size a crash test gives uploads to a bucket
// (SHEETQ_TEST_S3_PART_SIZE, read by fault_on.go), so that its exports of a few MiB go up
// in parts; zero, objstore's default, in production builds.
var testPartSize int64

// FaultS3PartSize is the part size a crash test gave this node's uploads to a bucket, so
// that the mid-upload fault point is reachable without exports of tens of MiB. Always
// zero without -tags faultpoints.
func FaultS3PartSize() int64 { return testPartSize }

// FaultPoint is a named point outside this package where a crash test may kill the
// process (a schedule's firing: "before-fire", "after-fire"; SHEETQ_FAULT arms it as
// any other). It does nothing unless the binary is built with -tags faultpoints.
func FaultPoint(name string) { faultPoint(name) }
