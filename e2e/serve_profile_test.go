package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// `sheetq serve --cpuprofile FILE` profiles the server from its start until it stops on
// SIGTERM, so that BENCHMARKS.md's profiles come from the shipped binary: the file is a
// gzipped pprof profile of CPU samples.
func TestServeCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	p := startBinary(t, t.TempDir(), nil, "--cpuprofile", prof)
	j := p.submit(t, `{"report":"demo","params":{"rows":2000,"seconds":0}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	p.terminate(t)

	raw, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a gzipped profile (%d bytes): %v", len(raw), err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The profile's string table names its sample types.
	for _, s := range []string{"samples", "cpu", "nanoseconds"} {
		if !bytes.Contains(body, []byte(s)) {
			t.Errorf("profile (%d bytes) does not name %q", len(body), s)
		}
	}
}
