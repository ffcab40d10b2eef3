package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// FileNamer is implemented by a Handler whose kind names its published file: the name
// of job id's file in the exports directory, such as "<id>.xlsx" or "<id>.csv" for an
// export, given the job's args as accepted (the file's format is one of them). The
// engine publishes, records (store.FileResult.Name) and recovers the file under it, so
// the name must depend on nothing but id and args. A kind that does not implement it
// publishes its file under the bare id.
type FileNamer interface {
	FileName(id string, args json.RawMessage) string
}

// fileName is the name job id of kind h, with args, publishes its file under (FileNamer).
func fileName(h Handler, id string, args json.RawMessage) string {
	if n, ok := h.(FileNamer); ok {
		return n.FileName(id, args)
	}
	return id
}

// FilePath returns where the published file named name (a job's FileName) lives under
// exportsDir. A name that is empty or not a plain file name gives "": never a path
// outside exportsDir, nor exportsDir itself (removing that would remove the folder).
func FilePath(exportsDir, name string) string {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return ""
	}
	return filepath.Join(exportsDir, name)
}

// partExt ends every attempt's file in the tmp directory.
const partExt = ".part"

// PartGlob matches every attempt's file in the tmp directory (PartName), for the
// start-up sweep and sheetq doctor.
const PartGlob = "*" + partExt

// PartName is the name of an attempt's file while it is being written, in the tmp
// directory: "<id>.<attempt>.part".
func PartName(id string, attempt int) string {
	return id + "." + strconv.Itoa(attempt) + partExt
}

// ParsePartName splits a PartName; a name of another shape gives attempt -1.
func ParsePartName(name string) (id string, attempt int) {
	base := strings.TrimSuffix(name, partExt)
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
