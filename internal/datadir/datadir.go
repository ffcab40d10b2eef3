// Package datadir is the one description of a data directory's layout (ARCHITECTURE.md,
// "Data directory"): the database, the part files' and published files' folders, the
// reports folder, the config file, the session key, and the lock with its pid file that
// make one process own the directory. The names of the files inside tmp/ and exports/
// belong to the engine and the job kinds (jobs.PartName, jobs.FileNamer).
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/gofrs/flock"

	"sheetq/internal/durable"
)

// Dir is the layout of the data directory at Root.
type Dir struct {
	Root string
}

// DB is the SQLite file.
func (d Dir) DB() string { return filepath.Join(d.Root, "sheetq.db") }

// Tmp holds part files being written.
func (d Dir) Tmp() string { return filepath.Join(d.Root, "tmp") }

// Exports holds published files.
func (d Dir) Exports() string { return filepath.Join(d.Root, "exports") }

// Reports holds report files.
func (d Dir) Reports() string { return filepath.Join(d.Root, "reports") }

// Config is the default config file.
func (d Dir) Config() string { return filepath.Join(d.Root, "sheetq.toml") }

// LockFile is the file whose exclusive lock makes a process own the directory.
func (d Dir) LockFile() string { return filepath.Join(d.Root, "sheetq.lock") }

// PIDFile records the owning process's pid and URL.
func (d Dir) PIDFile() string { return filepath.Join(d.Root, "sheetq.pid") }

// SessionKey holds the key that signs browser sessions (created on first start).
func (d Dir) SessionKey() string { return filepath.Join(d.Root, "session.key") }

// Default is the user's data folder for sheetq: $XDG_DATA_HOME/sheetq (or
// ~/.local/share/sheetq) on Unix, ~/Library/Application Support/sheetq on macOS and
// %AppData%\sheetq on Windows.
func Default() (string, error) {
	switch runtime.GOOS {
	case "windows", "darwin", "ios":
		dir, err := os.UserConfigDir() // %AppData%; ~/Library/Application Support
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "sheetq"), nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "sheetq"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find data directory: %w (set --data)", err)
	}
	return filepath.Join(home, ".local", "share", "sheetq"), nil
}

// ErrInUse is returned when another process owns the data directory.
var ErrInUse = errors.New("data directory in use")

// Owner is what the owning process records about itself beside the lock.
type Owner struct {
	PID int
	URL string
}

// Lock is the exclusive lock that makes one process own a data directory.
type Lock struct {
	fl  *flock.Flock
	dir Dir
}

// Lock takes the data directory for this process. The OS drops the lock when the
// process dies, however it dies, so a crash never leaves the directory locked.
func (d Dir) Lock() (*Lock, error) {
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		if readOnly(err) {
			return nil, fmt.Errorf("cannot create the data directory %s (%w): create it yourself, or choose another with --data", d.Root, err)
		}
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := d.checkWritable(); err != nil {
		return nil, err
	}
	fl := flock.New(d.LockFile())
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock data directory %s: %w", d.Root, err)
	}
	if !ok {
		o, _ := d.ReadOwner()
		who := "another sheetq process"
		if o.PID > 0 {
			who = fmt.Sprintf("sheetq process %d", o.PID)
			if o.URL != "" {
				who += " serving " + o.URL
			}
		}
		return nil, fmt.Errorf("%w: %s is held by %s", ErrInUse, d.Root, who)
	}
	return &Lock{fl: fl, dir: d}, nil
}

// ErrReadOnly is returned when the data directory cannot be written.
var ErrReadOnly = errors.New("data directory is read-only")

// checkWritable creates and removes a file in the directory. Without it, a read-only
// directory (a read-only mount, or another user's folder) that already holds a database
// failed later with SQLite's "unable to open database file (14)", which names neither the
// folder nor the fix.
func (d Dir) checkWritable() error {
	err := durable.Writable(d.Root)
	switch {
	case err == nil:
		return nil
	case readOnly(err):
		return explained{fmt.Errorf("%w: %w", ErrReadOnly, err), fmt.Sprintf("sheetq cannot write in its data directory %s (%v), where it keeps its database, lock and exports: "+
			"make it writable for this user (check its owner and permissions, and that its disk is not mounted read-only), "+
			"or choose another data directory with --data", d.Root, err)}
	}
	return fmt.Errorf("check that %s is writable: %w", d.Root, err)
}

// explained is an error whose message says what is wrong and what to do, in place of the
// message of the error it wraps (still found by errors.Is and errors.As).
type explained struct {
	err error
	msg string
}

func (e explained) Error() string { return e.msg }
func (e explained) Unwrap() error { return e.err }

// readOnly reports whether err is the OS refusing a write: no permission, or a file
// system mounted read-only.
func readOnly(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// SetOwner records this process's pid and URL for a second process's error message.
func (l *Lock) SetOwner(url string) error {
	body := fmt.Sprintf("%d\n%s\n", os.Getpid(), url)
	tmp := l.dir.PIDFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.dir.PIDFile())
}

// Unlock releases the directory and removes the pid file.
func (l *Lock) Unlock() error {
	_ = os.Remove(l.dir.PIDFile())
	return l.fl.Unlock()
}

// ReadOwner reads the pid file of the process that owns (or last owned) the directory.
func (d Dir) ReadOwner() (Owner, error) {
	b, err := os.ReadFile(d.PIDFile())
	if err != nil {
		return Owner{}, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	o := Owner{PID: pid}
	if len(lines) > 1 {
		o.URL = strings.TrimSpace(lines[1])
	}
	return o, nil
}

// Running reports whether a process owns the data directory now. It takes and at once
// releases the lock, so a server starting in that instant could be refused; tools that
// call it say so.
func (d Dir) Running() (bool, error) {
	if _, err := os.Stat(d.Root); err != nil {
		return false, err
	}
	fl := flock.New(d.LockFile())
	ok, err := fl.TryLock()
	if err != nil {
		return false, fmt.Errorf("probe the lock of %s: %w", d.Root, err)
	}
	if ok {
		_ = fl.Unlock()
	}
	return !ok, nil
}
