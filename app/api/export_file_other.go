//go:build !unix

package api

import "os"

// openPublishedFlags: without FIFOs in the file system, a plain read-only open.
const openPublishedFlags = os.O_RDONLY
