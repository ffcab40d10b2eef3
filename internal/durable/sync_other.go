//go:build !windows

package durable

func isUnsupportedSync(error) bool { return false }
