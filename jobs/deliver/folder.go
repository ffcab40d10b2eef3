package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"sheetq/internal/durable"
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

// resolvedWithin is CheckFolder on disk: path with its symbolic links resolved must be
// under a root with its own resolved, so that a link inside a root cannot lead out of it.
func resolvedWithin(path string, roots []string) (bool, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, err
	}
	for _, root := range roots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue // a root that is not there holds nothing
		}
		if within(real, r) {
			return true, nil
		}
	}
	return false, nil
}

// folder copies the export's file into the target folder under its download name,
// atomically: a temporary file in that folder, fsynced, renamed over the name, and the
// folder fsynced, so that a reader of the folder sees the whole file or none (the name
// is replaced whole when it was there: a later firing's file of the same name).
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
	if ok, err := resolvedWithin(dir, h.cfg.Folders); err != nil {
		return jobs.Retryable("folder_unreadable", err)
	} else if !ok {
		return jobs.Permanent("folder_not_allowed", fmt.Errorf("folder %s: %w: a symbolic link leads out of the allowed folders", dir, ErrFolderNotAllowed))
	}
	name := filepath.Base(a.DownloadName)
	if name == "." || name == string(filepath.Separator) || name == "" {
		return jobs.Permanentf("bad_args", "delivery has no file name")
	}
	src, _, err := h.cfg.Files.Open(ctx, a.File)
	if err != nil {
		return fileError(err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".sheetq-"+name+".*.tmp")
	if err != nil {
		return diskError(dir, err)
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmpName)
		}
	}()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum), contextReader{ctx, src})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return diskError(dir, err)
	}
	if n != a.Size || (a.SHA256 != "" && hex.EncodeToString(sum.Sum(nil)) != a.SHA256) {
		return jobs.Retryable("file_mismatch", fmt.Errorf("the export's file read back as %d bytes that do not match what the export recorded (%d bytes)", n, a.Size))
	}
	if err := durable.Rename(tmpName, filepath.Join(dir, name)); err != nil {
		return diskError(dir, err)
	}
	done = true
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
