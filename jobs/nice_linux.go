package jobs

import (
	"runtime"
	"syscall"
)

// LowerPrioritySupported reports whether Config.Nice has an effect on this system.
const LowerPrioritySupported = true

// lowerPriority moves the calling goroutine onto an OS thread of its own and gives that
// thread the nice value n (Linux sets it per thread). The goroutine never unlocks the
// thread, so when the goroutine ends the thread ends with it and the lowered priority
// never reaches other goroutines.
func lowerPriority(n int) error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), n)
}
