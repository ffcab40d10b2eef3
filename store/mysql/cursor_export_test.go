package mysql

// SetAfterFlush sets the hook a transaction runs between its events and its COMMIT, and
// returns a func that unsets it.
func SetAfterFlush(fn func()) (unset func()) {
	afterFlush = fn
	return func() { afterFlush = nil }
}
