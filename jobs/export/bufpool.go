package export

import (
	"bufio"
	"io"
	"sync"
)

// Buffers every export needs once (its package's zip writer, a sheet's rows file, the
// copy of a sheet's compressed rows into the package) are reused across exports. A
// server busy with small exports (the burst profile's 2,000 rows) otherwise made about
// 1.3 MB of garbage a file, most of it these and excelize's templates, and its
// collections came often enough to show in the accept latency of the requests around
// them (BENCHMARKS.md, issue 43).
var (
	bufWriters sync.Pool // *bufio.Writer of bufWriterSize
	copyBufs   = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// bufWriterSize is the buffer of a package's and a rows file's writes: zip.NewWriter
// takes a *bufio.Writer this large as its own instead of adding a 4 KiB one.
const bufWriterSize = 64 << 10

// getBufWriter returns a pooled *bufio.Writer writing to w.
func getBufWriter(w io.Writer) *bufio.Writer {
	if bw, ok := bufWriters.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, bufWriterSize)
}

// putBufWriter gives bw back to the pool; the caller no longer uses it. What it still
// buffers is dropped, and it keeps no reference to its writer.
func putBufWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	bufWriters.Put(bw)
}
