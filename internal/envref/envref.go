// Package envref reads settings written as env:NAME from the environment, and secrets
// written as file:PATH from a file, so that a password, DSN or key need not sit in the
// config file.
package envref

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Resolve returns v itself, or for env:NAME the value of the environment variable NAME
// with surrounding white space trimmed. A NAME that is missing, unset or blank is an
// error that names it.
func Resolve(v string) (string, error) {
	name, ok := strings.CutPrefix(v, "env:")
	if !ok {
		return v, nil
	}
	if name == "" {
		return "", errors.New(`"env:" names no environment variable`)
	}
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return "", fmt.Errorf("environment variable %s is not set", name)
	}
	return s, nil
}

// maxSecretFile bounds a file:PATH secret: a token or a password, not a document.
const maxSecretFile = 64 << 10

// Secret is Resolve for a secret, which may also be file:PATH: the file's content with
// one trailing newline (\n or \r\n) removed, as a secret mounted by an orchestrator or
// written by echo has. A relative PATH is relative to dir (the config file's folder).
// An empty or missing file is an error that names the path; no error quotes the
// secret. Only secrets take file:, since a DSN may itself start with it.
func Secret(v, dir string) (string, error) {
	path, ok := strings.CutPrefix(v, "file:")
	if !ok {
		return Resolve(v)
	}
	if path == "" {
		return "", errors.New(`"file:" names no file`)
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("secret file %s: %w", path, err)
	case len(b) > maxSecretFile:
		return "", fmt.Errorf("secret file %s is larger than %d KiB", path, maxSecretFile>>10)
	}
	s, crlf := strings.CutSuffix(string(b), "\r\n")
	if !crlf {
		s = strings.TrimSuffix(s, "\n")
	}
	if s == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return s, nil
}
