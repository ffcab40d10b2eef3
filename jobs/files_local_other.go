//go:build !unix

package jobs

import "os"

// openPublishedFlags: without FIFOs in the file system, a plain read-only open.
const openPublishedFlags = os.O_RDONLY
