package officecrypt

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"testing"

	"github.com/xuri/excelize/v2"
)

// The benchmarks encrypt packages of a few sizes from memory to io.Discard, beside a
// plain copy of the same bytes and excelize's in-memory encryption, so that their
// MB/s compare. Each Encrypt also derives its keys (100,000 SHA-512 hashes), which is
// most of the time at 64 KiB and little at 64 MiB. The contents are random: encryption
// does not look at them. cmd internal/cryptbench measures real xlsx files, with peak
// memory, one process per run.
//
//	go test -run '^$' -bench . -benchtime 3x ./internal/officecrypt/

var benchSizes = []int{64 << 10, 8 << 20, 64 << 20}

// benchEach runs f as a sub-benchmark for each of benchSizes, with the package to
// encrypt.
func benchEach(b *testing.B, f func(b *testing.B, plain []byte)) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			plain := make([]byte, size)
			rand.Read(plain)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			f(b, plain)
		})
	}
}

// onlyReader hides a bytes.Reader's WriteTo, so that a copy goes through a buffer as a
// file's copy to a response does, rather than in one write.
type onlyReader struct{ io.Reader }

func BenchmarkCopy(b *testing.B) {
	benchEach(b, func(b *testing.B, plain []byte) {
		for b.Loop() {
			if _, err := io.Copy(io.Discard, onlyReader{bytes.NewReader(plain)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncrypt(b *testing.B) {
	benchEach(b, func(b *testing.B, plain []byte) {
		for b.Loop() {
			if err := Encrypt(io.Discard, bytes.NewReader(plain), int64(len(plain)), "pw"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkExcelizeEncrypt is excelize's standard encryption (AES-128, SHA-1, a spin
// count of 50,000) of the package held in memory, into a new slice of the whole file.
func BenchmarkExcelizeEncrypt(b *testing.B) {
	benchEach(b, func(b *testing.B, plain []byte) {
		for b.Loop() {
			if _, err := excelize.Encrypt(plain, &excelize.Options{Password: "pw"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
