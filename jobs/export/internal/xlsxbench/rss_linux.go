//go:build linux

package main

import (
	"os"
	"syscall"
)

// maxRSS returns a finished process's peak resident set size in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024 // Linux reports KiB
	}
	return 0
}
