package export

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
)

// sheetLike is n bytes of XML much like a sheet's, with some incompressible noise, so
// that matches cross the blocks' boundaries and some blocks compress badly.
func sheetLike(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `<row r="%d"><c r="A%d"><v>%d</v></c><c r="B%d" t="inlineStr"><is><t>%s</t></is></c></row>`,
			i, i, r.IntN(1e6), i, strings.Repeat("x", r.IntN(40)))
		if i%5000 == 0 {
			noise := make([]byte, 40<<10)
			for j := range noise {
				noise[j] = byte(r.Uint32())
			}
			b.Write(noise)
		}
	}
	return b.Bytes()[:n]
}

// The blocks, compressed apart and in parallel, make one raw deflate stream that the
// standard library's reader inflates to the input, whatever the size of the writes
// and however the input falls on the blocks' boundaries.
func TestParallelDeflateRoundTrip(t *testing.T) {
	data := sheetLike(5*deflateBlock + 12345)
	for _, tc := range []struct {
		name  string
		size  int
		procs int
		piece int
	}{
		{"empty", 0, 4, 1},
		{"small", 100, 4, 7},
		{"one block exactly", deflateBlock, 4, 32 << 10},
		{"several, one proc", len(data), 1, 32 << 10},
		{"several, four procs", len(data), 4, 32 << 10},
		{"several, whole", len(data), 2, len(data)},
		{"several, odd pieces", len(data), 3, 100_003},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := data[:tc.size]
			var out bytes.Buffer
			var yields atomic.Int64 // yield is called from the compressing goroutines
			d := newParallelDeflate(&out, deflateLevel, func() { yields.Add(1) }, nil)
			d.procs = tc.procs
			for p := in; len(p) > 0; {
				k := min(len(p), tc.piece)
				if n, err := d.Write(p[:k]); n != k || err != nil {
					t.Fatalf("write: %d, %v", n, err)
				}
				p = p[k:]
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(flate.NewReader(&out))
			if err != nil {
				t.Fatalf("inflate: %v", err)
			}
			if !bytes.Equal(got, in) {
				t.Fatalf("inflated %d bytes, want the %d written", len(got), len(in))
			}
			if tc.size > 64<<10 && yields.Load() == 0 {
				t.Errorf("no yield while compressing %d bytes", tc.size)
			}
		})
	}
}

type failingDest struct {
	n   int
	err error
}

func (f *failingDest) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	f.n--
	return len(p), nil
}

// A failing destination stops the writes with its error, and Close still waits for
// the blocks in flight and returns that error.
func TestParallelDeflateWriteError(t *testing.T) {
	full := errors.New("disk full")
	d := newParallelDeflate(&failingDest{n: 1, err: full}, deflateLevel, nil, nil)
	d.procs = 2
	data := sheetLike(8 * deflateBlock)
	var werr error
	for p := data; len(p) > 0 && werr == nil; p = p[min(len(p), 64<<10):] {
		_, werr = d.Write(p[:min(len(p), 64<<10)])
	}
	if !errors.Is(werr, full) {
		t.Fatalf("Write: %v, want the destination's error", werr)
	}
	if err := d.Close(); !errors.Is(err, full) {
		t.Fatalf("Close: %v, want the destination's error", err)
	}
	if len(d.inflight) != 0 {
		t.Fatalf("%d blocks still in flight after Close", len(d.inflight))
	}
}
