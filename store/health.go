package store

import (
	"errors"
	"syscall"
)

// The kinds of fault a driver maps its errors to (Driver.Fault). The API answers each
// with its own status and code (app/problem), the engine backs off on ErrBusy.

// ErrBusy is returned when another connection or transaction held what a statement
// needed (SQLite's lock beyond busy_timeout, a serialization failure or deadlock on a
// server): the database is fine, and the same request can succeed a moment later.
var ErrBusy = errors.New("database busy")

// ErrUnavailable is returned when the database server does not answer: no connection
// could be made, one broke, or the server is shutting down, starting or out of
// connections. A statement on a broken connection has an unknown outcome: a retry with
// the same idempotency key is what makes it safe.
var ErrUnavailable = errors.New("database unavailable")

// faultKinds are the kinds Store.fault does not wrap twice.
var faultKinds = []error{ErrBusy, ErrUnavailable, ErrDiskFull, ErrReadOnly, ErrCorrupt, ErrIO}

// IsBusy reports whether err is of kind ErrBusy.
func IsBusy(err error) bool { return errors.Is(err, ErrBusy) }

// IsDiskFull reports whether err is of kind ErrDiskFull.
func IsDiskFull(err error) bool {
	// What writes through the OS rather than a driver (the sample database, a file)
	// meets a full disk as ENOSPC.
	return errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC)
}

// ErrDiskFull is returned when a write finds no room on the disk (SQLITE_FULL, ENOSPC).
var ErrDiskFull = errors.New("disk full")

// ErrReadOnly is returned when the database file or its folder cannot be written.
var ErrReadOnly = errors.New("database is read-only")

// ErrCorrupt is returned when the database finds its own files damaged.
var ErrCorrupt = errors.New("database is corrupt")

// ErrIO is returned when the operating system fails a read or write of the database.
var ErrIO = errors.New("database I/O error")
