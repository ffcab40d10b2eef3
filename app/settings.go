package app

import (
	"cmp"
	"fmt"
	"maps"
	"strings"
	"time"

	"sheetq/app/api"
	"sheetq/app/events"
	"sheetq/internal/datadir"
	"sheetq/internal/objstore"
	"sheetq/jobs"
	"sheetq/jobs/webhook"
)

// Settings is the configuration of a node resolved once: flags beat their SHEETQ_*
// variables (the command line merges those two), which beat the config file, which
// beats the defaults. Resolve is the only thing that makes one, and nothing changes it
// afterwards: the command line sizes the process by it, then hands the same value to
// Serve, so nothing is merged twice.
type Settings struct {
	cfg Config // validated: defaults filled, the config file read, lanes, stores and tokens resolved
}

// Resolve checks cfg and resolves it with the config file (cfg.File, or the file that
// cfg.ConfigFile or the data directory names) into Settings. A refused value of a flag
// or its variable is a *BadValueError naming the flag; one of the config file names the
// file and its key. Nothing is created: a refused start leaves no data directory.
func Resolve(cfg Config) (*Settings, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Settings{cfg: cfg}, nil
}

// Engine is the engine's configuration with every lane the config file adds: the command
// line sizes GOMAXPROCS and the memory limit by its workers.
func (s *Settings) Engine() jobs.Config {
	eng := s.cfg.Engine
	eng.Queues = maps.Clone(eng.Queues) // the copy is the caller's; the settings stay as resolved
	return eng
}

// Stores is the job store and file store the node uses.
func (s *Settings) Stores() Stores { return s.cfg.stores }

// AuditKeep is how long the audit log keeps an entry (--audit-keep); zero keeps all.
func (s *Settings) AuditKeep() time.Duration { return s.cfg.AuditKeep }

// TestHooks are knobs for tests: the command line never sets them, and a nil
// Config.Test behaves as a zero TestHooks, which is production's behaviour.
type TestHooks struct {
	// Now, if set, is the clock of the store and the engine.
	Now func() time.Time
	// BusyTimeout is the store's busy_timeout (default the store's).
	BusyTimeout time.Duration
	// Events tunes the event hub (buffers, keep-alive, progress interval).
	Events events.Config
	// Webhooks, if set, is the webhook delivery config instead of the config file's
	// [webhooks] table (New sets its Recorder and Logger).
	Webhooks *webhook.Config
	// Idle leaves the engine stopped after Start: accepted jobs stay PENDING.
	Idle bool
	// BodyTimeout is the time a client has to send a request body (default
	// middleware.RequestBodyTimeout).
	BodyTimeout time.Duration
}

// hooks is c.Test, or the zero TestHooks.
func (c *Config) hooks() TestHooks {
	if c.Test == nil {
		return TestHooks{}
	}
	return *c.Test
}

// LoadConfigFile reads the config file that configFlag (--config) names, else the data
// directory's sheetq.toml, which may be absent (an empty config).
func LoadConfigFile(dataDir, configFlag string) (FileConfig, error) {
	return LoadFileConfig(cmp.Or(configFlag, datadir.Dir{Root: dataDir}.Config()), configFlag == "")
}

// StoreFlags are the command line's choice of stores: --store, --files and
// --files-download, each already filled from its SHEETQ_* variable when the flag was
// not given; "" is not set.
type StoreFlags struct {
	Store, Files, FilesDownload string
}

// Stores are the job store and the file store a node works on. `sheetq serve` and the
// tool commands (doctor, backup, store copy) resolve them alike (ResolveStores), so that
// a tool works on the stores the server would use (docs/several-nodes.md).
type Stores struct {
	// DSN is the PostgreSQL job store's URL, env:NAME already read; "" is the data
	// directory's SQLite file.
	DSN string
	// FilesURL is the bucket's s3:// URL; "" is the data directory's exports/ folder.
	FilesURL string
	// Bucket is the bucket's settings with the config file's keys ([files] access_key
	// and secret_key, each may be env:NAME or file:PATH); without them objstore reads
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Nil with FilesURL "".
	Bucket *objstore.Config
	// Download is how a file in the bucket reaches a client.
	Download api.Download
}

// ResolveStores resolves the stores: a flag (or its variable) beats the config file's
// [store] and [files] tables, which beat the data directory's own SQLite file and
// exports/ folder. A refused value names where it came from (setting).
func ResolveStores(flags StoreFlags, fc FileConfig) (Stores, error) {
	var s Stores
	var err error
	if s.DSN, err = StoreURL(cmp.Or(flags.Store, fc.Store.URL)); err != nil {
		return Stores{}, setting(flags.Store != "", "--store", fc, "[store] url", err)
	}
	if s.FilesURL = cmp.Or(flags.Files, fc.Files.URL); s.FilesURL != "" {
		b, err := objstore.ParseURL(s.FilesURL)
		if err != nil {
			return Stores{}, setting(flags.Files != "", "--files", fc, "[files] url", err)
		}
		if b.AccessKey, err = ResolveSecret(fc.Files.AccessKey); err != nil {
			return Stores{}, fc.Errorf("[files] access_key: %w", err)
		}
		if b.SecretKey, err = ResolveSecret(fc.Files.SecretKey); err != nil {
			return Stores{}, fc.Errorf("[files] secret_key: %w", err)
		}
		s.Bucket = &b
	}
	if err := fc.CheckBucketKeys(flags.Files); err != nil {
		return Stores{}, err
	}
	if s.Download, err = api.ParseDownload(cmp.Or(flags.FilesDownload, fc.Files.Download)); err != nil {
		return Stores{}, setting(flags.FilesDownload != "", "--files-download", fc, "[files] download", err)
	}
	return s, nil
}

// BadValueError is a setting of the command line or the environment that Resolve refused
// before anything was created: the CLI exits 2 for it, as for any bad flag (docs/cli.md,
// "Command line"), naming the SHEETQ_* variable when that set it. A bad config file's
// error is not one; it names the file instead.
type BadValueError struct {
	Err error
	// Flag is the refused flag's name without dashes ("store"), for the CLI to name
	// the SHEETQ_* variable when that set it.
	Flag string
}

func (e *BadValueError) Error() string { return e.Err.Error() }
func (e *BadValueError) Unwrap() error { return e.Err }

// setting names a refused setting by where it came from: a *BadValueError naming the
// flag when the command line or the environment set it, else the config file and its
// key.
func setting(fromFlag bool, flag string, fc FileConfig, key string, err error) error {
	if fromFlag {
		return &BadValueError{fmt.Errorf("%s: %w", flag, err), strings.TrimPrefix(flag, "--")}
	}
	return fc.Errorf("%s: %w", key, err)
}
