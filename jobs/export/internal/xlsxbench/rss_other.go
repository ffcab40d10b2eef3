//go:build !linux && !darwin

package main

import "os"

// maxRSS returns 0 (shown as n/a): this system's peak RSS is not read here.
func maxRSS(*os.ProcessState) int64 { return 0 }
