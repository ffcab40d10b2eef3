//go:build !linux

package jobs

import "errors"

// LowerPrioritySupported reports whether Config.Nice has an effect on this system.
const LowerPrioritySupported = false

// lowerPriority is Linux only: elsewhere handlers run at the process's priority.
func lowerPriority(int) error { return errors.ErrUnsupported }
