package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"sheetq/internal/officecrypt"
	"sheetq/jobs"
)

// ErrFolderNotAllowed is the error of a folder outside every root the config file allows.
var ErrFolderNotAllowed = errors.New("folder not allowed")

// checkRoot checks one allowed root as the config file names it.
func checkRoot(root string) error {
	if root == "" || !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return fmt.Errorf("%q: want an absolute, clean folder path", root)
	}
	return nil
}

// CheckFolder says whether a folder target may write to path: it must be one of roots
// (the config file's [deliveries] folders) or a folder below one. It reads nothing on
// disk (the folder may not exist yet when a schedule is saved); an attempt checks again
// with symbolic links resolved. The error wraps ErrFolderNotAllowed.
func CheckFolder(path string, roots []string) error {
	if path == "" || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("folder %q: want an absolute, clean folder path", path)
	}
	for _, root := range roots {
		if within(path, root) {
			return nil
		}
	}
	if len(roots) == 0 {
		return fmt.Errorf("folder %s: %w: the config file allows no folder (add it under [deliveries] folders)", path, ErrFolderNotAllowed)
	}
	return fmt.Errorf("folder %s: %w: it is not under %s ([deliveries] folders in the config file)", path, ErrFolderNotAllowed, strings.Join(roots, ", "))
}

// within reports whether path is root or below it (both clean).
func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// resolvedRoot is CheckFolder on disk: path with its symbolic links resolved must be
// under a root with its own resolved, so that a link inside a root cannot lead out of it.
// It returns that resolved root and path's resolved place below it (rel, "." for the
// root itself); root is "" when path leads out of every root.
func resolvedRoot(path string, roots []string) (root, rel string, err error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", err
	}
	for _, root := range roots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue // a root that is not there holds nothing
		}
		if within(real, r) {
			rel, err := filepath.Rel(r, real)
			if err != nil {
				return "", "", err
			}
			return r, rel, nil
		}
	}
	return "", "", nil
}

// openFolder opens the folder rel below the allowed root as a handle that every write
// of a delivery goes through. The checks before it read paths, and a link swapped in
// after them would lead the writes out of the allowed folders (issue 36, item 4); an
// os.Root refuses to follow a link out of it, and the folder's handle pins the folder
// that was checked, so the temporary file and its rename stay in one folder inside root.
func openFolder(root, rel string) (*os.Root, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return r, nil
	}
	defer r.Close()
	return r.OpenRoot(rel)
}

// folder copies the export's file into the target folder under its download name,
// atomically: a temporary file in that folder, fsynced, renamed over the name, and the
// folder fsynced, so that a reader of the folder sees the whole file or none (the name
// is replaced whole when it was there: a later firing's file of the same name). Every
// write goes through one handle on the folder (openFolder), never through its path.
func (h *Handler) folder(ctx context.Context, a Args) error {
	dir := a.Target.Path
	if err := CheckFolder(dir, h.cfg.Folders); err != nil {
		return jobs.Permanent("folder_not_allowed", err)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A mount that is not there yet, or a folder about to be made: try again later.
		return jobs.Retryable("folder_missing", fmt.Errorf("folder %s does not exist", dir))
	case err != nil:
		return jobs.Retryable("folder_unreadable", err)
	case !fi.IsDir():
		return jobs.Permanentf("not_a_folder", "%s is not a folder", dir)
	}
	root, rel, err := resolvedRoot(dir, h.cfg.Folders)
	if err != nil {
		return jobs.Retryable("folder_unreadable", err)
	} else if root == "" {
		return jobs.Permanent("folder_not_allowed", linkedOut(dir))
	}
	name := filepath.Base(a.DownloadName)
	if name == "." || name == ".." || name == string(filepath.Separator) || name == "" {
		return jobs.Permanentf("bad_args", "delivery has no file name")
	}
	var password string
	if a.Encrypted() {
		if password, err = h.password(a.Target); err != nil {
			return jobs.Retryable("password_unavailable", err) // set the variable, or put the file back
		}
	}
	src, _, err := h.cfg.Files.Open(ctx, a.File)
	if err != nil {
		return fileError(err)
	}
	defer src.Close()
	d, err := openFolder(root, rel)
	if err != nil {
		return h.openError(dir, err)
	}
	defer d.Close()
	tmp, tmpName, err := createTemp(d, ".sheetq-"+name+".", ".tmp")
	if err != nil {
		return diskError(dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close() // a second Close after the one below is harmless
			_ = d.Remove(tmpName)
		}
	}()
	sum := sha256.New()
	var n int64
	if password != "" {
		// The file is checked as it is read (its size by the encryption, its sha256
		// here); what lands in the folder is the encrypted file.
		tr := &countReader{r: io.TeeReader(contextReader{ctx, src}, sum)}
		err = officecrypt.Encrypt(tmp, tr, a.Size, password)
		n = tr.n
		if err != nil && (tr.eof || n > a.Size) {
			err = nil // a short or long file, not the folder's fault: the check below says so
		}
	} else {
		n, err = io.Copy(io.MultiWriter(tmp, sum), contextReader{ctx, src})
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return diskError(dir, err)
	}
	if n != a.Size || (a.SHA256 != "" && hex.EncodeToString(sum.Sum(nil)) != a.SHA256) {
		return jobs.Retryable("file_mismatch", fmt.Errorf("the export's file read back as %d bytes that do not match what the export recorded (%d bytes)", n, a.Size))
	}
	if err := d.Rename(tmpName, name); err != nil {
		return diskError(dir, err)
	}
	done = true
	if err := syncFolder(d); err != nil {
		return diskError(dir, err)
	}
	return nil
}

// linkedOut is the error of a folder whose links lead out of every allowed root.
func linkedOut(dir string) error {
	return fmt.Errorf("folder %s: %w: a symbolic link leads out of the allowed folders", dir, ErrFolderNotAllowed)
}

// openError classifies a failure to open a folder that the checks just passed: it
// changed in between. Gone is retried, as a missing folder is; a link that now leads out
// fails for good, as it does when the check sees it; anything else is retried.
func (h *Handler) openError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return jobs.Retryable("folder_missing", fmt.Errorf("folder %s does not exist", dir))
	}
	if root, _, rerr := resolvedRoot(dir, h.cfg.Folders); rerr == nil && root == "" {
		return jobs.Permanent("folder_not_allowed", linkedOut(dir))
	}
	return jobs.Retryable("folder_unreadable", fmt.Errorf("open folder %s: %w", dir, err))
}

// createTemp is os.CreateTemp inside d: a new file named prefix, a random number and
// suffix, opened for writing only by its owner (mode 0600, as os.CreateTemp makes it).
func createTemp(d *os.Root, prefix, suffix string) (*os.File, string, error) {
	for range 10000 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10) + suffix
		f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create a temporary file %s*%s: %w", prefix, suffix, fs.ErrExist)
}

// syncFolder fsyncs the folder d so that a rename into it survives a power cut.
// Windows cannot fsync a folder; there the rename is durable enough (as durable.SyncDir
// says).
func syncFolder(d *os.Root) error {
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && runtime.GOOS != "windows" {
		return err
	}
	return nil
}

// diskError classifies a write into the target folder: a full disk or any other fault
// is worth another attempt later; a folder that refuses us is too (an admin may fix its
// permissions), but says so.
func diskError(dir string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return jobs.Retryable("folder_full", fmt.Errorf("the disk of %s is full: %w", dir, err))
	case errors.Is(err, fs.ErrPermission):
		return jobs.Retryable("folder_denied", fmt.Errorf("cannot write in %s: %w", dir, err))
	}
	return jobs.Retryable("folder_write", fmt.Errorf("write in %s: %w", dir, err))
}

// fileError classifies a failure to open the export's file: gone for good (deleted,
// expired) or a store that did not answer.
func fileError(err error) error {
	var refused *jobs.RefusedFileError
	if errors.Is(err, fs.ErrNotExist) || errors.As(err, &refused) {
		return jobs.Permanent("file_gone", fmt.Errorf("the export's file is gone (deleted or expired): %w", err))
	}
	return jobs.Retryable("file_unavailable", fmt.Errorf("open the export's file: %w", err))
}

// contextReader stops a copy when ctx ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// countReader counts the bytes read through it, and whether it reached their end.
type countReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.eof = c.eof || errors.Is(err, io.EOF)
	return n, err
}
