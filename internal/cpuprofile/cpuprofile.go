// Package cpuprofile writes a CPU profile of a command's run to a file, for the
// benchmark commands' -cpuprofile flags (loadtest, xlsxbench, bench/river).
package cpuprofile

import (
	"errors"
	"os"
	"runtime/pprof"
)

// Start begins profiling into a new file at path and returns the function that stops
// the profile and closes the file. An empty path profiles nothing, and stop does nothing.
func Start(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
