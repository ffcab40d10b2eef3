package app

import (
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"

	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The URL logged and recorded for a listener is one a person can open: loopback stands in
// for an unspecified address, in the family it was given in.
func TestLocalURL(t *testing.T) {
	t.Parallel()
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	for _, tt := range []struct {
		host string
		addr net.Addr
		want string
	}{
		{"127.0.0.1", tcp("127.0.0.1"), "http://127.0.0.1:8080"},
		{"::1", tcp("::1"), "http://[::1]:8080"},
		{"192.168.1.10", tcp("192.168.1.10"), "http://192.168.1.10:8080"},
		{"0.0.0.0", tcp("::"), "http://127.0.0.1:8080"}, // Go reports 0.0.0.0 as [::]
		{"0.0.0.0", tcp("0.0.0.0"), "http://127.0.0.1:8080"},
		{"", tcp("::"), "http://127.0.0.1:8080"},
		{"::", tcp("::"), "http://[::1]:8080"},
	} {
		if got := localURL(tt.host, tt.addr); got != tt.want {
			t.Errorf("localURL(%q, %s) = %s, want %s", tt.host, tt.addr, got, tt.want)
		}
	}
	if u := networkURL(tcp("127.0.0.1")); u != "" {
		t.Errorf("networkURL of a loopback listener = %q, want none", u)
	}
}

// Listening on every address, the server logs and records (for a second launch, which
// opens it in the browser) a URL that answers, and names this machine for others.
func TestRunOnEveryAddressGivesAUsableURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs apptest.SyncBuffer
	url, _ := startRun(t, Config{
		Addr: "0.0.0.0:0", DataDir: dir, ReportsDir: filepath.Join(dir, "reports"), Version: "test",
		Token: "s3cret-token-0123", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, 20*time.Second)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %s, want http://127.0.0.1:PORT", url)
	}
	res, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatalf("GET %s/healthz: %v", url, err)
	}
	res.Body.Close()
	if owner, err := (datadir.Dir{Root: dir}).ReadOwner(); err != nil || owner.URL != url {
		t.Errorf("owner %+v (%v), want url %s", owner, err, url)
	}
	line := ""
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "msg=listening") {
			line = l
		}
	}
	if !strings.Contains(line, "url="+url) || strings.Contains(line, "url=http://[::]") {
		t.Errorf("listening line %q, want url=%s", line, url)
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
		want := "network_url=http://" + net.JoinHostPort(host, port)
		if !strings.Contains(line, want) {
			t.Errorf("listening line %q, want %s", line, want)
		}
	}
}
