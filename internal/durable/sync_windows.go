//go:build windows

package durable

// isUnsupportedSync reports the error Windows gives for fsync on a directory handle.
func isUnsupportedSync(err error) bool { return err != nil }
