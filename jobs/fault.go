package jobs

// faultPoint is where a crash test may kill the process (named points such as
// "after-rename"). It does nothing unless the binary is built with -tags faultpoints.
var faultPoint = func(string) {}

// faultsArmed is set when SHEETQ_FAULT arms a point (fault_on.go), so that a point which
// needs set-up, such as mid-batch-end's wrapper, costs nothing otherwise.
var faultsArmed bool
