package mysql

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// ParseURL turns a mysql:// or mariadb:// URL (user:pass@host:port/db?param=value) into
// go-sql-driver's DSN (user:pass@tcp(host:port)/db?param=value). The port defaults to
// 3306; the query's parameters are the driver's (tls=true, timeout=5s, ...).
func ParseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "mysql" && u.Scheme != "mariadb" {
		return "", fmt.Errorf("not a mysql:// URL: %q", redact(raw))
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host := u.Host
	if host == "" {
		return "", fmt.Errorf("mysql URL %q names no host", redact(raw))
	}
	if u.Port() == "" {
		host += ":3306"
	}
	cfg.Net, cfg.Addr = "tcp", host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return "", fmt.Errorf("mysql URL %q names no database", redact(raw))
	}
	dsn := cfg.FormatDSN()
	if q := u.RawQuery; q != "" {
		// FormatDSN wrote no parameters of its own for a fresh Config beyond what the
		// query gives; ParseDSN checks them.
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + q
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("mysql URL %q: %w", redact(raw), err)
	}
	return dsn, nil
}

// redact is a URL with its password replaced, for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
