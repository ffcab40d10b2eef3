//go:build darwin

package main

import (
	"os"
	"syscall"
)

// maxRSS returns a finished process's peak resident set size in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss // macOS reports bytes
	}
	return 0
}
