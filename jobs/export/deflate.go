package export

import (
	"bytes"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
)

// deflateLevel is the flate level of the sheets, klauspost/compress's. Level 4 is the
// knee of size against time on sheet XML (BENCHMARKS.md, "Compression level"): 4x the
// speed of archive/zip's default (the standard library's level 5, excelize's) for files
// about 16% larger; level 1 is only 15% faster for files 10% larger again, and level 5
// is 31% slower for 7% smaller.
const deflateLevel = 4

// deflateBlock is how much of a sheet's XML one goroutine compresses at a time. Large
// enough that the blocks' boundaries cost little (each block starts with the previous
// block's last 32 KiB as its dictionary, so only the Huffman tables restart), small
// enough that the blocks in flight stay a few MiB.
const deflateBlock = 1 << 20

// deflateWindow is deflate's window: how far back a match may reach.
const deflateWindow = 32 << 10

// parallelDeflate compresses what is written to it into one raw deflate stream on w, in
// blocks compressed by up to procs goroutines at once (started with spawn, the job's
// run.Go, so that they run at the job's priority), as pigz does: every block but the
// last ends with a sync flush, which byte-aligns it, so the blocks' outputs concatenate
// into one stream, and each starts from its predecessor's last 32 KiB, so a match can
// still reach back across a boundary. The outputs are written to w in order, on the
// writing goroutine (so w need not be safe for concurrent use). Close writes the last
// block, and must be called even after an error: it waits for the blocks in flight.
type parallelDeflate struct {
	w       io.Writer
	level   int
	procs   int
	yield   func()       // between pieces of a block (xlsxOptions.yield)
	spawn   func(func()) // starts a compressing goroutine (xlsxOptions.spawn)
	work    chan *block  // to the compressing goroutines; closed by Close
	started int          // compressing goroutines started, at most procs

	buf      []byte   // the block being filled
	dict     []byte   // the last block's final deflateWindow bytes
	inflight []*block // in order; at most procs
	ending   bool     // End is writing the last block: no dictionary follows it
	err      error    // the first error: w's, or a compressor's
}

type block struct {
	in, dict []byte
	last     bool
	out      *bytes.Buffer
	err      error
	done     chan struct{}
}

// Buffers and compressors are reused across sheets and exports: an export of a few
// thousand rows is one block, and allocating its 1 MiB buffer and its compressor's
// tables afresh made a burst of small exports collect garbage more often.
var (
	deflateIns     sync.Pool // *[]byte of deflateBlock capacity
	deflateOuts    sync.Pool // *bytes.Buffer
	deflateWriters sync.Pool // *flate.Writer at deflateLevel
)

// newParallelDeflate compresses to w at level, on as many goroutines as there are
// cores (the server raises GOMAXPROCS above that for its low-priority workers). A nil
// yield or spawn is a no-op and the go statement.
func newParallelDeflate(w io.Writer, level int, yield func(), spawn func(func())) *parallelDeflate {
	if yield == nil {
		yield = func() {}
	}
	if spawn == nil {
		spawn = func(f func()) { go f() }
	}
	procs := max(1, min(runtime.GOMAXPROCS(0), runtime.NumCPU()))
	return &parallelDeflate{w: w, level: level, procs: procs, yield: yield, spawn: spawn,
		work: make(chan *block, procs)}
}

// Write implements io.Writer.
func (d *parallelDeflate) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if d.err != nil {
			return n, d.err
		}
		if d.buf == nil {
			d.buf = d.getBuf()
		}
		k := min(len(p), deflateBlock-len(d.buf))
		d.buf = append(d.buf, p[:k]...)
		n, p = n+k, p[k:]
		if len(d.buf) == deflateBlock {
			d.start(false)
		}
	}
	return n, d.err
}

// Close compresses the last block, writes every output in order and waits for every
// block in flight; it returns the first error.
func (d *parallelDeflate) Close() error {
	if d.err == nil {
		if d.buf == nil {
			d.buf = d.getBuf()
		}
		if d.started == 0 {
			// The whole stream is this one block: compressed here, with no goroutine.
			b := &block{in: d.buf, dict: d.dict, last: true, done: make(chan struct{})}
			d.buf = nil
			d.compress(b)
			d.inflight = append(d.inflight, b)
		} else {
			d.start(true)
		}
	}
	for len(d.inflight) > 0 {
		d.finishOldest()
	}
	close(d.work) // the compressing goroutines end
	return d.err
}

func (d *parallelDeflate) getBuf() []byte {
	if b, ok := deflateIns.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, deflateBlock)
}

// start hands the filled block to a goroutine, after waiting for the oldest block in
// flight if procs are already busy.
func (d *parallelDeflate) start(last bool) {
	for len(d.inflight) >= d.procs && d.err == nil {
		d.finishOldest()
	}
	if d.err != nil {
		return
	}
	b := &block{in: d.buf, dict: d.dict, last: last, done: make(chan struct{})}
	if !last && !d.ending {
		// The next block's dictionary: a copy, since b.in goes back to the pool. A short
		// block (Sync) keeps the end of the dictionary before it. The stream's last block
		// (End) has no next one.
		d.dict = window(d.dict, d.buf)
	}
	d.buf = nil
	d.inflight = append(d.inflight, b)
	if d.started < d.procs && d.started < len(d.inflight) {
		d.started++
		d.spawn(func() {
			for b := range d.work {
				d.compress(b)
			}
		})
	}
	d.work <- b // a compressing goroutine takes it
}

// window is the last deflateWindow bytes of dict followed by buf, in a new slice.
func window(dict, buf []byte) []byte {
	if len(buf) >= deflateWindow {
		return append([]byte(nil), buf[len(buf)-deflateWindow:]...)
	}
	keep := min(len(dict), deflateWindow-len(buf))
	return append(append(make([]byte, 0, keep+len(buf)), dict[len(dict)-keep:]...), buf...)
}

// Sync ends the block being filled, even if short, with a sync flush, and writes every
// block's output to w: what was written so far is then a whole number of byte-aligned,
// non-final deflate blocks on w, which a later stream can continue (a checkpoint), or
// which a last, final block ends. It returns the first error.
func (d *parallelDeflate) Sync() error {
	if d.err == nil && len(d.buf) > 0 {
		d.start(false)
	}
	for len(d.inflight) > 0 {
		d.finishOldest()
	}
	return d.err
}

// End is Sync without a final block: the stream on w stays open for what follows it (a
// sheet's tail), and the compressing goroutines end. Like Close, it must be called
// even after an error.
func (d *parallelDeflate) End() error {
	d.ending = true
	err := d.Sync()
	if d.buf != nil {
		in := d.buf
		deflateIns.Put(&in)
		d.buf = nil
	}
	close(d.work)
	return err
}

// resumeParallelDeflate is newParallelDeflate for a stream that continues one ended
// by Sync, whose last deflateWindow bytes were dict.
func resumeParallelDeflate(w io.Writer, level int, dict []byte, yield func(), spawn func(func())) *parallelDeflate {
	d := newParallelDeflate(w, level, yield, spawn)
	d.dict = window(nil, dict)
	return d
}

// finishOldest waits for the oldest block in flight and writes its output.
func (d *parallelDeflate) finishOldest() {
	b := d.inflight[0]
	d.inflight = d.inflight[1:]
	<-b.done
	in := b.in
	deflateIns.Put(&in)
	if d.err == nil {
		d.err = b.err
	}
	if d.err == nil {
		_, d.err = d.w.Write(b.out.Bytes())
	}
	b.out.Reset()
	deflateOuts.Put(b.out)
}

func (d *parallelDeflate) compress(b *block) {
	defer close(b.done)
	b.out, _ = deflateOuts.Get().(*bytes.Buffer)
	if b.out == nil {
		b.out = new(bytes.Buffer)
	}
	b.out.Grow(len(b.in) / 4)
	var fw *flate.Writer
	if d.level == deflateLevel {
		fw, _ = deflateWriters.Get().(*flate.Writer)
	}
	if fw == nil {
		var err error
		if fw, err = flate.NewWriterDict(b.out, d.level, b.dict); err != nil {
			b.err = err
			return
		}
	} else {
		fw.ResetDict(b.out, b.dict)
	}
	if d.level == deflateLevel {
		defer deflateWriters.Put(fw)
	}
	// In pieces, with a yield between them: a block is milliseconds of CPU.
	for p := b.in; len(p) > 0; {
		piece := p[:min(len(p), 64<<10)]
		if _, b.err = fw.Write(piece); b.err != nil {
			return
		}
		p = p[len(piece):]
		d.yield()
	}
	if b.last {
		b.err = fw.Close()
	} else {
		b.err = fw.Flush() // ends byte-aligned, not final: the next block continues the stream
	}
}
