package app

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
)

// FileConfig is the config file (<data>/sheetq.toml unless --config says otherwise).
type FileConfig struct {
	// Sources are the named data sources report files use (-- source: NAME).
	Sources map[string]export.SourceConfig `toml:"sources"`
	// Webhooks signs and guards webhook deliveries ([webhooks]).
	Webhooks webhook.Settings `toml:"webhooks"`
	// Serve holds values for `sheetq serve` flags, by flag name with '_' for '-'
	// ([serve] workers = 4); flags and SHEETQ_* variables override them. main checks
	// the names against its flags.
	Serve map[string]any `toml:"serve"`
	// Tokens are named access tokens ([[tokens]] name = "ci", token = "env:CI_TOKEN").
	Tokens []TokenConfig `toml:"tokens"`
}

// TokenConfig is one [[tokens]] entry.
type TokenConfig struct {
	// Name is recorded on the jobs the token creates (created_by) and shown in logs.
	Name string `toml:"name"`
	// Token is the secret: a literal, env:NAME (an environment variable) or file:PATH
	// (a file, such as a systemd credential).
	Token string `toml:"token"`
}

// LoadFileConfig reads the config file. A missing file is an empty config when
// optional is true (the default path), and an error when the user named the file.
func LoadFileConfig(path string, optional bool) (FileConfig, error) {
	var fc FileConfig
	md, err := toml.DecodeFile(path, &fc)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return FileConfig{}, nil
		}
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return FileConfig{}, fmt.Errorf("config %s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		return FileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	// A misspelt key would otherwise be ignored silently.
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, 0, len(und))
		for _, k := range und {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		return FileConfig{}, fmt.Errorf("config %s: unknown key %s", path, strings.Join(keys, ", "))
	}
	return fc, nil
}
