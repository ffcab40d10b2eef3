package mysql

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"sheetq/store"
)

// The server's error numbers the store maps (MySQL's and MariaDB's share them).
const (
	erDiskFull           = 1021 // ER_DISK_FULL
	erErrorOnWrite       = 1026 // ER_ERROR_ON_WRITE
	erGetErrno           = 1030 // ER_GET_ERRNO: an error from the storage engine
	erNotKeyfile         = 1034 // ER_NOT_KEYFILE
	erTooManyConnections = 1040 // ER_CON_COUNT_ERROR
	erServerShutdown     = 1053 // ER_SERVER_SHUTDOWN
	erRecordFileFull     = 1114 // ER_RECORD_FILE_FULL: the table is full
	erCrashedOnUsage     = 1194 // ER_CRASHED_ON_USAGE
	erTooManyUserConns   = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	erLockWaitTimeout    = 1205 // ER_LOCK_WAIT_TIMEOUT
	erLockDeadlock       = 1213 // ER_LOCK_DEADLOCK
	erDupEntry           = 1062 // ER_DUP_ENTRY
	erOptionPrevents     = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only
	erIndexCorrupt       = 1712 // ER_INDEX_CORRUPT
	erReadOnlyTx         = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	erReadOnlyMode       = 1836 // ER_READ_ONLY_MODE
	erInnodbReadOnly     = 1874 // ER_INNODB_READ_ONLY
	erTableCorrupt       = 1877 // ER_TABLE_CORRUPT
	erConnectionKilled   = 1927 // MariaDB's ER_CONNECTION_KILLED
	erLockNowait         = 3572 // ER_LOCK_NOWAIT
	erClientTimeout      = 4031 // MySQL's ER_CLIENT_INTERACTION_TIMEOUT
)

// number is err's server error number, 0 when it is none.
func number(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// IsUnavailable reports whether err is the database not answering rather than refusing
// the request: no connection could be made, one broke (before or during the statement),
// or the server is shutting down or out of connections. A statement on a connection
// that broke has an unknown outcome: a retry with the same idempotency key is what makes
// it safe.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	switch number(err) {
	case erTooManyConnections, erServerShutdown, erTooManyUserConns, erConnectionKilled, erClientTimeout:
		return true
	case 0:
	default:
		return false
	}
	var ne net.Error
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed)
}

// IsBusy reports whether err is a conflict with another transaction that a retry
// resolves: a deadlock (the server rolled the whole transaction back), a lock wait
// timeout (only the statement), or a lock not taken with NOWAIT.
func IsBusy(err error) bool {
	switch number(err) {
	case erLockWaitTimeout, erLockDeadlock, erLockNowait:
		return true
	}
	return false
}

// isDeadlock reports whether err is a deadlock, after which the server has rolled the
// transaction back and the whole of it may go again.
func isDeadlock(err error) bool { return number(err) == erLockDeadlock }

// isUnique reports whether err is a unique or primary key violation.
func isUnique(err error) bool { return number(err) == erDupEntry }

// faultKind is the core's kind of a fault of the server's disk or files, or nil.
func faultKind(err error) error {
	n := number(err)
	switch n {
	case erDiskFull, erRecordFileFull:
		return store.ErrDiskFull
	case erOptionPrevents, erReadOnlyTx, erReadOnlyMode, erInnodbReadOnly:
		return store.ErrReadOnly
	case erNotKeyfile, erCrashedOnUsage, erIndexCorrupt, erTableCorrupt:
		return store.ErrCorrupt
	case erErrorOnWrite, erGetErrno:
		// An operating system error inside the message: errno 28 is ENOSPC.
		msg := err.Error()
		if strings.Contains(msg, "errno: 28") || strings.Contains(msg, "error 28") || strings.Contains(msg, "No space left") {
			return store.ErrDiskFull
		}
		return store.ErrIO
	}
	return nil
}

// Fault maps err to the core's kind of it (store.Driver).
func (s *Store) Fault(err error) error {
	switch {
	case IsUnavailable(err):
		return store.ErrUnavailable
	case IsBusy(err):
		return store.ErrBusy
	}
	return faultKind(err)
}

// unstorable marks err as store.ErrUnstorable when the server refused a value of the
// statement and would refuse it again: a string that is not UTF-8 (1366), too long for
// its column (1406), a number out of range (1264), a value it cannot convert (1292), a
// check constraint (MySQL 3819, MariaDB 4025). The engine must not retry it forever.
func unstorable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnstorable) {
		return err
	}
	switch number(err) {
	case 1366, 1406, 1264, 1292, 3819, 4025, 3140:
		return fmt.Errorf("%w: %w", store.ErrUnstorable, err)
	}
	return err
}
