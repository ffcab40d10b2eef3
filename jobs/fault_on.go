//go:build faultpoints

package jobs

import (
	"os"
	"strings"
)

// With -tags faultpoints, SHEETQ_FAULT=point[,point...] kills the process with SIGKILL
// (no deferred code, no flush) the first time execution reaches a named point. This is
// for crash tests only; production builds compile the no-op in fault.go.
func init() {
	points := os.Getenv("SHEETQ_FAULT")
	if points == "" {
		return
	}
	want := map[string]bool{}
	for _, p := range strings.Split(points, ",") {
		want[strings.TrimSpace(p)] = true
	}
	faultPoint = func(name string) {
		if want[name] {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill()
			select {} // Kill is asynchronous on some platforms; never continue past the point
		}
	}
}
