// Package envref reads settings written as env:NAME from the environment, so that a
// password, DSN or key need not sit in the config file.
package envref

import (
	"errors"
	"fmt"
	"os"
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
