package sqlite

import "time"

// ObserveWrites makes the store call observe with the duration of each write
// transaction on SQLite's one writer connection: each accepted group of requests, claim,
// end, heartbeat and change, from BEGIN until COMMIT (or ROLLBACK) returned. The time
// includes waiting for the connection, the commit's fsync, and the WAL checkpoint that
// the commit crossing wal_autocheckpoint runs, so a slow disk and the checkpoints show
// as the time every write on the writer waits for. nil stops the calls. It is safe to
// call while the store is in use; observe must be safe for concurrent use and quick.
func (s *Store) ObserveWrites(observe func(time.Duration)) {
	if observe == nil {
		s.onWrite.Store(nil)
		return
	}
	s.onWrite.Store(&observe)
}
