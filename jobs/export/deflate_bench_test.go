package export

import (
	"archive/zip"
	"bytes"
	stdflate "compress/flate"
	"io"
	"runtime"
	"strconv"
	"testing"

	"github.com/klauspost/compress/flate"
)

// demoSheetXML is the first sheet's XML of a demo export of rows rows.
func demoSheetXML(b *testing.B, rows int64) []byte {
	b.Helper()
	var buf bytes.Buffer
	if err := writeXLSX(b.Context(), &buf, demoSource{}, demoQuery(rows), xlsxOptions{tmpDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := zr.Open("xl/worksheets/sheet1.xml")
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	xml, err := io.ReadAll(rc)
	if err != nil {
		b.Fatal(err)
	}
	return xml
}

// BenchmarkSheetDeflate compresses 200,000 demo rows of sheet XML with archive/zip's
// default (the standard library's level 5, what excelize uses), klauspost/compress's
// levels 1 to 6 on one goroutine, and the writer's parallelDeflate at deflateLevel
// with GOMAXPROCS goroutines. MB/s is of the XML; "size%" is the compressed size as a
// percentage of it. BENCHMARKS.md ("Compression level") has the figures that chose
// deflateLevel.
func BenchmarkSheetDeflate(b *testing.B) {
	xml := demoSheetXML(b, 200_000)
	run := func(b *testing.B, compress func(w io.Writer) (io.WriteCloser, error)) {
		b.SetBytes(int64(len(xml)))
		var out countWriter
		out.w = io.Discard
		for b.Loop() {
			out.n = 0
			fw, err := compress(&out)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := fw.Write(xml); err != nil {
				b.Fatal(err)
			}
			if err := fw.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(100*float64(out.n)/float64(len(xml)), "size%")
	}
	b.Run("stdlib-5", func(b *testing.B) {
		run(b, func(w io.Writer) (io.WriteCloser, error) { return stdflate.NewWriter(w, 5) })
	})
	for level := 1; level <= 6; level++ {
		b.Run("klauspost-"+strconv.Itoa(level), func(b *testing.B) {
			run(b, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, level) })
		})
	}
	b.Run("parallel-"+strconv.Itoa(deflateLevel)+"-procs-"+strconv.Itoa(runtime.GOMAXPROCS(0)), func(b *testing.B) {
		run(b, func(w io.Writer) (io.WriteCloser, error) { return newParallelDeflate(w, deflateLevel, nil, nil), nil })
	})
}
