//go:build unix

package jobs

import (
	"os"
	"syscall"
)

// openPublishedFlags opens without blocking: a FIFO swapped in after the Lstat check
// would otherwise hold the request until a writer appears. A regular file ignores it.
const openPublishedFlags = os.O_RDONLY | syscall.O_NONBLOCK
