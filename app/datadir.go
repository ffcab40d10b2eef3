package app

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

// DataDir is the layout of a data directory.
type DataDir struct {
	Root string
}

// DB is the SQLite file.
func (d DataDir) DB() string { return filepath.Join(d.Root, "sheetq.db") }

// Tmp holds part files being written.
func (d DataDir) Tmp() string { return filepath.Join(d.Root, "tmp") }

// Exports holds published files.
func (d DataDir) Exports() string { return filepath.Join(d.Root, "exports") }

// Reports holds report files.
func (d DataDir) Reports() string { return filepath.Join(d.Root, "reports") }

// Config is the default config file.
func (d DataDir) Config() string { return filepath.Join(d.Root, "sheetq.toml") }

func (d DataDir) lockPath() string { return filepath.Join(d.Root, "sheetq.lock") }
func (d DataDir) pidPath() string  { return filepath.Join(d.Root, "sheetq.pid") }

// DefaultDataDir is the user's data folder for sheetq: $XDG_DATA_HOME/sheetq (or
// ~/.local/share/sheetq) on Unix, ~/Library/Application Support/sheetq on macOS and
// %AppData%\sheetq on Windows.
func DefaultDataDir() (string, error) {
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

// ErrDirInUse is returned when another process owns the data directory.
var ErrDirInUse = errors.New("data directory in use")

// Owner is what the owning process records about itself beside the lock.
type Owner struct {
	PID int
	URL string
}

// dirLock is the exclusive lock that makes one process own a data directory.
type dirLock struct {
	fl  *flock.Flock
	dir DataDir
}

// lock takes the data directory for this process. The OS drops the lock when the
// process dies, however it dies, so a crash never leaves the directory locked.
func (d DataDir) lock() (*dirLock, error) {
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		if readOnly(err) {
			return nil, fmt.Errorf("cannot create the data directory %s (%w): create it yourself, or choose another with --data", d.Root, err)
		}
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := d.checkWritable(); err != nil {
		return nil, err
	}
	fl := flock.New(d.lockPath())
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
		return nil, fmt.Errorf("%w: %s is held by %s", ErrDirInUse, d.Root, who)
	}
	return &dirLock{fl: fl, dir: d}, nil
}

// ErrDirReadOnly is returned when the data directory cannot be written.
var ErrDirReadOnly = errors.New("data directory is read-only")

// checkWritable creates and removes a file in the directory. Without it, a read-only
// directory (a read-only mount, or another user's folder) that already holds a database
// failed later with SQLite's "unable to open database file (14)", which names neither the
// folder nor the fix.
func (d DataDir) checkWritable() error {
	err := durable.Writable(d.Root)
	switch {
	case err == nil:
		return nil
	case readOnly(err):
		return explained{fmt.Errorf("%w: %w", ErrDirReadOnly, err), fmt.Sprintf("sheetq cannot write in its data directory %s (%v), where it keeps its database, lock and exports: "+
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

// setOwner records this process's pid and URL for a second process's error message.
func (l *dirLock) setOwner(url string) error {
	body := fmt.Sprintf("%d\n%s\n", os.Getpid(), url)
	tmp := l.dir.pidPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.dir.pidPath())
}

func (l *dirLock) unlock() error {
	_ = os.Remove(l.dir.pidPath())
	return l.fl.Unlock()
}

// ReadOwner reads the pid file of the process that owns (or last owned) the directory.
func (d DataDir) ReadOwner() (Owner, error) {
	b, err := os.ReadFile(d.pidPath())
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

// sessionKeyPath holds the key that signs browser sessions (created on first start).
func (d DataDir) sessionKeyPath() string { return filepath.Join(d.Root, "session.key") }

// Running reports whether a process owns the data directory now. It takes and at once
// releases the lock, so a server starting in that instant could be refused; tools that
// call it say so.
func (d DataDir) Running() (bool, error) {
	if _, err := os.Stat(d.Root); err != nil {
		return false, err
	}
	fl := flock.New(d.lockPath())
	ok, err := fl.TryLock()
	if err != nil {
		return false, fmt.Errorf("probe the lock of %s: %w", d.Root, err)
	}
	if ok {
		_ = fl.Unlock()
	}
	return !ok, nil
}
