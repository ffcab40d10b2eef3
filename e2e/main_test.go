//go:build !windows

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary is the sheetq binary that TestMain builds once for every test of the package.
var binary string

// TestMain builds the binary from the module root, with -tags faultpoints, into a
// temporary directory, runs the tests, and removes it.

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sheetq-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sheetq")
	// Client commands keep interrupted requests' keys in the user cache: keep the tests'
	// out of the real one.
	// The build keeps the real Go build cache: it lives under XDG_CACHE_HOME by default,
	// and an empty one makes every run compile all dependencies again (minutes).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOCACHE:", err)
		os.Exit(1)
	}
	os.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	build := exec.Command("go", "build", "-tags", "faultpoints", "-o", binary, ".")
	build.Dir = ".." // the module root: package main is only there
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sheetq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
