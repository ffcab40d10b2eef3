package cli

import (
	"flag"
	"fmt"
	"net/url"
	"strings"

	"sheetq/internal/client"
	"sheetq/internal/datadir"
)

// clientFlags are the flags every client command (export, jobs) takes, in fs.
type clientFlags struct {
	server, token, data string
	fs                  *flag.FlagSet
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	cf.fs = fs
	fs.StringVar(&cf.server, "server", "", "server `URL` (default: the local instance of the data directory, else http://127.0.0.1:8080)")
	fs.StringVar(&cf.token, "token", "", "access `token`, sent as Authorization: Bearer")
	fs.StringVar(&cf.data, "data", "", "data `directory` whose running server to use when --server is not set")
}

// client builds the API client: --server, else the URL the data directory's owner
// recorded in its pid file, else the default address.
func (cf *clientFlags) client() (*client.Client, error) {
	base := cf.server
	if base == "" {
		if dir, err := dataRoot(cf.data); err == nil {
			if o, err := (datadir.Dir{Root: dir}).ReadOwner(); err == nil && o.URL != "" {
				base = o.URL
			}
		}
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	bad := func(want string) error {
		err := usageError{fmt.Errorf("--server %q: want %s", base, want)}
		if base != cf.server {
			return err // the pid file's URL: an empty SHEETQ_SERVER is not to blame
		}
		return blameEnv(cf.fs, err, "server")
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, bad("an http:// or https:// URL")
	}
	// A URL that cannot be one is a bad command line (exit 2), not a server that could
	// not be reached (exit 4, with Go's "parse ...: missing ']' in host"); a query or
	// fragment would end up in front of every request's path.
	if u, err := url.Parse(base); err != nil || u.Host == "" || strings.ContainsAny(base, "?#") {
		return nil, bad("an http:// or https:// URL with a host and no query")
	}
	return client.New(base, cf.token, nil), nil
}
