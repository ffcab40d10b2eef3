// Package gcdefaults holds the server's garbage-collection settings, which the server
// applies at start (sheetq serve) and the xlsx benchmark applies to its pipeline runs,
// so that both measure the server as shipped.
package gcdefaults

import (
	"os"
	"runtime/debug"
)

// GCPercent is the server's garbage-collection target (GOGC) unless the GOGC variable
// sets one. Accepting a request allocates about 35 KB (decoding, the insert, the answer,
// the event stream), and the live heap is a few MB, so with Go's default of 100 a burst
// of 1,200 requests a second ran about 30 collections a second; each one's mark phase
// takes a whole P, half of a 2-core machine, and the group commit that every request
// waits for queued behind it. At 400 the heap may grow to five times the live data (tens
// of MB here) and collections are a quarter as frequent (BENCHMARKS.md).
const GCPercent = 400

// MemoryLimit is the server's soft memory limit (GOMEMLIMIT) when neither GOGC nor
// GOMEMLIMIT is set: memoryBase plus memoryPerExport for each export that may run at
// once. GCPercent lets the heap grow to five times the live data, which a request burst
// needs, but a long export's garbage then piled up with its rows: peak RSS 108 MB at
// 100k rows and 185 MB at 3M. Below the limit the collector paces by GOGC as before;
// near it, it collects sooner, so a 3M-row export's peak stays close to a 100k one's
// (BENCHMARKS.md, "Memory at default settings"). It is soft: a server that needs more
// gets it, with more collections.
func MemoryLimit(exportSlots int) int64 {
	return memoryBase + int64(exportSlots)*memoryPerExport
}

const (
	memoryBase      = 64 << 20
	memoryPerExport = 16 << 20
)

// Apply sets GCPercent, and MemoryLimit(exportSlots) unless GOMEMLIMIT is set, when the
// GOGC variable is not set: a GOGC of the user's own is left alone, with no limit.
func Apply(exportSlots int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(GCPercent)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit(exportSlots))
	}
}
