//go:build !windows

package jobs

func isUnsupportedSync(error) bool { return false }
