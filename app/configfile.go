package app

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"sheetq/jobs"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
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
	// Queues are the lanes and their sizes ([queues.heavy] workers = 1): the exports lane
	// (--workers), the webhooks lane, the deliveries lane and any a report names with
	// "-- queue: NAME".
	Queues map[string]QueueConfig `toml:"queues"`
	// Store is the shared job store ([store] url = "postgres://..."), for several nodes.
	Store StoreConfig `toml:"store"`
	// Files is the shared file store ([files] url = "s3://..."), for several nodes.
	Files FilesConfig `toml:"files"`
	// SMTP is the relay that email deliveries go through ([smtp]).
	SMTP deliver.SMTP `toml:"smtp"`
	// Schedules are scheduled exports kept in the file ([[schedules]]), made to match it
	// at each start (configschedules.go).
	Schedules []ScheduleConfig `toml:"schedules"`
	// Deliveries says where a schedule's files may go ([deliveries]).
	Deliveries DeliveriesConfig `toml:"deliveries"`
	// OIDC signs people in with OpenID Connect ([oidc], configpeople.go).
	OIDC OIDCConfig `toml:"oidc"`
	// People give people who sign in with OpenID Connect a role, groups and attributes
	// by email ([[people]]).
	People []PersonConfig `toml:"people"`
	// Access says who may run a report without an "-- access:" line ([access]).
	Access AccessConfig `toml:"access"`

	// path is the file it was read from, which errors about its values name.
	path string
}

// Errorf is an error about a value of the file, naming the file: "config PATH: ...".
func (fc FileConfig) Errorf(format string, args ...any) error {
	return fmt.Errorf("config %s: %w", cmp.Or(fc.path, "file"), fmt.Errorf(format, args...))
}

// Path is the file the config was read from; "" when there was none (the default file,
// absent).
func (fc FileConfig) Path() string { return fc.path }

// CheckBucketKeys refuses [files] access_key or secret_key when no bucket is named, by
// flagURL (--files or SHEETQ_FILES) or [files] url: the keys would be ignored without a
// word, and the files kept in the data directory, when the url was most likely meant.
func (fc FileConfig) CheckBucketKeys(flagURL string) error {
	if flagURL != "" || fc.Files.URL != "" {
		return nil
	}
	for _, k := range []struct{ name, v string }{{"access_key", fc.Files.AccessKey}, {"secret_key", fc.Files.SecretKey}} {
		if k.v != "" {
			return fc.Errorf("[files] %s is the key of a bucket, but no bucket is named: give [files] url (or --files), or remove the key", k.name)
		}
	}
	return nil
}

// StoreConfig is the [store] table.
type StoreConfig struct {
	// URL is a postgres:// URL or env:NAME; --store and SHEETQ_STORE beat it.
	URL string `toml:"url"`
}

// FilesConfig is the [files] table.
type FilesConfig struct {
	// URL is s3://BUCKET/PREFIX?endpoint=...&region=...; --files and SHEETQ_FILES beat it.
	URL string `toml:"url"`
	// AccessKey and SecretKey are the bucket's credentials (each may be env:NAME or
	// file:PATH); unset, the standard AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are used.
	AccessKey string `toml:"access_key"`
	SecretKey string `toml:"secret_key"`
	// Download is "stream" or "redirect"; --files-download beats it.
	Download string `toml:"download"`
}

// QueueConfig is one [queues.NAME] table.
type QueueConfig struct {
	// Workers is how many of the queue's jobs run at once, from 1 to MaxWorkers.
	Workers int `toml:"workers"`
}

// MaxWorkers is the most workers a lane may have (--workers and [queues.NAME] workers).
const MaxWorkers = 256

// defaultDeliveryWorkers is the size of the deliveries lane (deliver.Queue) when the
// config file does not set it: as many as the webhooks lane, so that two relays that
// stopped answering hold the deliveries lane and nothing else.
const defaultDeliveryWorkers = 2

// Lanes is the engine configuration eng with the config file's lanes applied (lanes):
// the command line sizes GOMAXPROCS by every lane's workers before the server starts.
func (fc FileConfig) Lanes(eng jobs.Config, workersSet bool) (jobs.Config, error) {
	err := fc.lanes(&eng, workersSet)
	return eng, err
}

// lanes resolves the engine's lanes from the config file (ARCHITECTURE.md, rule 27):
// [queues.exports] sizes the exports lane unless workersSet (--workers, SHEETQ_WORKERS
// or [serve] workers, which beat the file), the webhooks lane has webhook.DefaultWorkers
// unless [queues.webhooks] says otherwise, the deliveries lane defaultDeliveryWorkers
// unless [queues.deliveries] does, and every other [queues.NAME] is a lane of its own.
// Names are written like report ids.
func (fc FileConfig) lanes(eng *jobs.Config, workersSet bool) error {
	queues := maps.Clone(eng.Queues)
	if queues == nil {
		queues = map[string]int{}
	}
	// Email and folder deliveries have a lane apart from webhooks: a stalled relay holds
	// a delivery's worker up to its timeout, and must not delay webhooks.
	for q, n := range map[string]int{webhook.Queue: webhook.DefaultWorkers, deliver.Queue: defaultDeliveryWorkers} {
		if _, ok := queues[q]; !ok {
			queues[q] = n
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fc.Queues)) {
		n := fc.Queues[name].Workers
		switch {
		case !export.IsQueueName(name):
			return fc.Errorf("[queues.%s]: a queue name is 1-64 lowercase letters, digits, _ or -, starting with a letter or digit", name)
		case n < 1 || n > MaxWorkers:
			return fc.Errorf("[queues.%s] workers must be from 1 to %d, not %d", name, MaxWorkers, n)
		case name == store.DefaultQueue:
			if !workersSet {
				eng.Workers = n
			}
		default:
			queues[name] = n
		}
	}
	eng.Queues = queues
	return nil
}

// TokenConfig is one [[tokens]] entry.
type TokenConfig struct {
	// Name is recorded on the jobs the token creates (created_by) and shown in logs.
	Name string `toml:"name"`
	// Token is the secret: a literal, env:NAME (an environment variable) or file:PATH
	// (a file, such as a systemd credential).
	Token string `toml:"token"`
	// Role is "admin" (the default, as before roles existed) or "member".
	Role string `toml:"role"`
	// Groups are the groups the token belongs to, for reports' "-- access:" lines.
	Groups []string `toml:"groups"`
	// Attrs are the token's attributes, for reports' "from=person.NAME" parameters.
	Attrs map[string]string `toml:"attrs"`
}

// LoadFileConfig reads the config file. A missing file is an empty config when
// optional is true (the default path), and an error when the user named the file.
func LoadFileConfig(path string, optional bool) (FileConfig, error) {
	var fc FileConfig
	text, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return FileConfig{}, fmt.Errorf("config %s: %w", path, err)
		}
		// A link to nothing (a moved file, a secret not mounted yet) is not a missing
		// file: starting without its tokens, sources and lanes would go unnoticed.
		if _, lerr := os.Lstat(path); lerr == nil {
			return FileConfig{}, fmt.Errorf("config %s: a link to a file that does not exist", path)
		}
		if optional {
			return FileConfig{}, nil
		}
		return FileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	md, err := toml.Decode(string(text), &fc)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return FileConfig{}, fmt.Errorf("config %s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		return FileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	if key := notATable(string(text)); key != "" {
		return FileConfig{}, fmt.Errorf("config %s: %s must be a table", path, key)
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
	fc.path = path
	return fc, nil
}

// notATable names the first key that FileConfig decodes into a map but that the file
// gives another value (sources = 3, params = [1]), or "". The decoder takes such a
// value for no value and marks the key decoded, so it would be ignored without a word.
func notATable(text string) string {
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		return "" // the decode into FileConfig has already read it
	}
	isTable := func(m map[string]any, key string) bool {
		v, ok := m[key]
		_, table := v.(map[string]any)
		return !ok || table
	}
	for _, key := range []string{"sources", "serve", "queues"} {
		if !isTable(raw, key) {
			return key
		}
	}
	scheds, _ := raw["schedules"].([]map[string]any)
	for i, sc := range scheds {
		if !isTable(sc, "params") {
			return fmt.Sprintf("schedules.params of [[schedules]] %d", i+1)
		}
	}
	return ""
}
