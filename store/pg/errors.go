package pg

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err is the database not answering rather than refusing
// the request: no connection could be made, one broke (before or during the statement),
// or the server is shutting down, starting up or out of connection slots. The same
// request is likely to work in a moment, so the API answers 503 with Retry-After
// (app/problem). A connection that broke during a statement leaves its outcome unknown:
// a retry with the same Idempotency-Key is what makes it safe.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08": // connection_exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		case pe.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// IsBusy reports whether err is a conflict with another transaction that a retry
// resolves (a serialization failure, a deadlock, a lock not available), as store.IsBusy
// does for SQLite's SQLITE_BUSY.
func IsBusy(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// hasNUL reports whether a value a client chose (an id in a path, a filter) holds a NUL.
// PostgreSQL's text cannot hold one, so no row has such a value; and the server refuses
// one as a parameter (22021, invalid byte sequence), which would be a 500 for what is
// only an unknown id. Callers answer "not found" or "none" without asking, as the
// SQLite store does by asking.
func hasNUL(vs ...string) bool {
	for _, v := range vs {
		if strings.IndexByte(v, 0) >= 0 {
			return true
		}
	}
	return false
}
