//go:build linux

// Command cryptbench measures one way of sending an xlsx file, in a process of its own so
// that its peak memory is its own, and prints one line:
//
//	go run ./internal/officecrypt/internal/cryptbench -mode stream -file export.xlsx
//	mode=stream bytes=71701898 out_bytes=71713280 wall_s=0.295 cpu_s=0.290 mb_s=243.1 peak_rss_mib=9.4 cold=false
//
// Modes:
//
//   - plain: the file read and written to the sink, as a plain download sends it.
//   - stream: the file encrypted to the sink by officecrypt.Encrypt as it is read, as
//     the encrypted download does.
//   - excelize: os.ReadFile, excelize.Encrypt of the whole file in memory (standard
//     encryption), and the result written to the sink.
//
// The sink counts the bytes and keeps none, as io.Discard: a download's bytes go to a
// socket, not to this disk, and writing them to a file would add the disk's writes to
// every mode alike. MB/s is the
// xlsx file's bytes (10^6 a MB) over the wall time, which runs from opening the file to
// the last byte written; CPU is the process's user+sys time and peak RSS its maxrss
// (getrusage). With -cold the file is first dropped from the page cache
// (posix_fadvise), so that it is read from the disk. Linux only. Run the modes in turn,
// several times each, and compare them as ratios within one run: see BENCHMARKS.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/xuri/excelize/v2"
	"golang.org/x/sys/unix"

	"sheetq/internal/officecrypt"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cryptbench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cryptbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		mode     = fs.String("mode", "", "plain, stream or excelize")
		path     = fs.String("file", "", "the xlsx file")
		password = fs.String("password", "correct horse battery staple", "the password to encrypt with")
		cold     = fs.Bool("cold", false, "drop the file from the page cache first, so that it is read from the disk")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("-file is required")
	}
	if *cold {
		if err := dropCache(*path); err != nil {
			return err
		}
	}
	sink := &counter{}
	start := time.Now()
	var size int64
	var err error
	switch *mode {
	case "plain":
		size, err = plain(sink, *path)
	case "stream":
		size, err = stream(sink, *path, *password)
	case "excelize":
		size, err = inMemory(sink, *path, *password)
	default:
		return fmt.Errorf("-mode: %q is not plain, stream or excelize", *mode)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", *mode, err)
	}
	wall := time.Since(start)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Fprintf(stdout, "mode=%s bytes=%d out_bytes=%d wall_s=%.3f cpu_s=%.3f mb_s=%.1f peak_rss_mib=%.1f cold=%t\n",
		*mode, size, sink.n, wall.Seconds(), cpu.Seconds(), float64(size)/1e6/wall.Seconds(),
		float64(ru.Maxrss)/1024, *cold) // Linux reports maxrss in KiB
	return nil
}

// plain copies the file to w and returns its size.
func plain(w io.Writer, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(w, f)
}

// stream encrypts the file to w as it reads it and returns its size.
func stream(w io.Writer, path, password string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), officecrypt.Encrypt(w, f, fi.Size(), password)
}

// inMemory reads the whole file, encrypts it with excelize and writes the result to w.
func inMemory(w io.Writer, path, password string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	enc, err := excelize.Encrypt(raw, &excelize.Options{Password: password})
	if err != nil {
		return 0, err
	}
	_, err = w.Write(enc)
	return int64(len(raw)), err
}

// dropCache asks the kernel to drop the file's pages from the page cache.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop %s from the page cache: %w", path, err)
	}
	return nil
}

// counter is the sink: it counts the bytes written and keeps none.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
