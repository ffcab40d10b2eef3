//go:build !unix

package cli

import "time"

// cpuTime is not measured on this system; the report shows zero.
func cpuTime() time.Duration { return 0 }
