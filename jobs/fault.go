package jobs

// faultPoint is where a crash test may kill the process (named points such as
// "after-rename"). It does nothing unless the binary is built with -tags faultpoints.
var faultPoint = func(string) {}
