package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sheetq/internal/filekind"
)

// hashingWriter counts and hashes what is written to the part file, so publishing does
// not read the file back.
type hashingWriter struct {
	w    io.Writer
	h    hash.Hash
	size int64
}

func newHashingWriter(w io.Writer) *hashingWriter {
	return &hashingWriter{w: w, h: sha256.New()}
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.size += int64(n)
	return n, err
}

func (hw *hashingWriter) sum() string { return hex.EncodeToString(hw.h.Sum(nil)) }

// HashFile returns the size and sha256 of a published file, for completing a job from a
// file that was published before a crash and for sheetq doctor --deep. Only a regular
// file counts as published: a link or a special file put in its place (by hand, or by
// anyone who can write exports/) is no export of ours, so the job is recovered and run
// again instead, and its rename then replaces the link. Lstat and the opened file must
// be the same file, so a swap between the two is refused too.
func HashFile(path string) (int64, string, error) {
	before, err := os.Lstat(path)
	if err != nil {
		return 0, "", err
	}
	if !before.Mode().IsRegular() {
		return 0, "", fmt.Errorf("%s is not a regular file (%s)", path, filekind.Of(before.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	if after, err := f.Stat(); err != nil || !os.SameFile(before, after) {
		return 0, "", fmt.Errorf("%s was replaced while being opened", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("hash %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// FilePath returns where a job's published file lives under exportsDir.
func FilePath(exportsDir, id string) string {
	return filepath.Join(exportsDir, id+".xlsx")
}

// PartName is the name of an attempt's file while it is being written, in the tmp
// directory: "<id>.<attempt>.part".
func PartName(id string, attempt int) string {
	return id + "." + strconv.Itoa(attempt) + ".part"
}

// ParsePartName splits a PartName; a name of another shape gives attempt -1.
func ParsePartName(name string) (id string, attempt int) {
	base := strings.TrimSuffix(name, ".part")
	i := strings.LastIndexByte(base, '.')
	if i < 0 {
		return base, -1
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil {
		return base, -1
	}
	return base[:i], n
}
