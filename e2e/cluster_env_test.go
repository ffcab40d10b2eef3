//go:build !windows

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The cluster test's environment: an S3-compatible server of its own (so that it may
// restart it), a PostgreSQL schema of its own, and what it needs to find one node's
// database connections.

// Throwaway root keys of the test's own versitygw, which listens on loopback only.
const (
	clusterS3Access = "sheetqcluster"
	clusterS3Secret = "sheetq_cluster_s3_secret"
	clusterS3Region = "us-east-1"
)

// s3Server is a versitygw process that the test owns, behind a reverse proxy that the
// nodes talk to. The proxy keeps one address across restarts of the server (which comes
// back on another port), and it sees each upload's body go by, so that the test can
// restart the server while an upload is under way rather than at a moment that only
// hopes to be one.
type s3Server struct {
	t      *testing.T
	bin    string
	dir    string
	proxy  *httptest.Server
	target atomic.Pointer[url.URL]

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	log      bytes.Buffer
	restarts int
	// armed, when set, is the next upload of a part to cut (armMidUpload).
	armed      *cut
	puts       atomic.Int64 // PUT requests with a body seen by the proxy
	multiparts atomic.Int64 // multipart uploads started (POST ?uploads)
	parts      atomic.Int64 // parts of multipart uploads sent (PUT ?partNumber)
	cutOff     atomic.Int64 // requests the proxy answered 502: the server went away under them
}

// versitygwBinary is the server .ci/s3 builds: $SHEETQ_S3_ROOT/bin/versitygw-VERSION,
// VERSION pinned in .ci/tools/s3/go.mod. Without it the test skips, except in CI.
func versitygwBinary(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("../.ci/tools/s3/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for line := range strings.SplitSeq(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/versity/versitygw" {
			version = f[1]
		}
	}
	if version == "" {
		t.Fatal("no versitygw version in .ci/tools/s3/go.mod")
	}
	bin := filepath.Join(cmp.Or(os.Getenv("SHEETQ_S3_ROOT"), "/tmp/sheetq-s3"), "bin", "versitygw-"+version)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v; CI runs .ci/s3 first, which builds it", bin, err)
		}
		t.Skipf("%s is missing: run .ci/s3 once to build it", bin)
	}
	return bin
}

// startS3 starts the test's own versitygw (posix backend in a temporary directory) and
// its proxy, and makes a bucket.
func startS3(t *testing.T, bucket string) *s3Server {
	t.Helper()
	s := &s3Server{t: t, bin: versitygwBinary(t), dir: t.TempDir()}
	s.proxy = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The Host header stays the proxy's: the client signed it (SigV4), and the
			// server checks the signature against the Host it receives.
			r.Out.URL.Scheme, r.Out.URL.Host = "http", s.target.Load().Host
			q := r.In.URL.Query()
			if r.In.Method == http.MethodPost && q.Has("uploads") {
				s.multiparts.Add(1)
			}
			if r.In.Method == http.MethodPut && r.In.ContentLength != 0 {
				s.puts.Add(1)
				part := q.Has("partNumber") && q.Has("uploadId")
				if part {
					s.parts.Add(1)
				}
				r.Out.Body = &watchedBody{ReadCloser: r.Out.Body, s: s, size: r.In.ContentLength, part: part}
			}
		},
		// A restart cuts requests in flight: the client gets the 502 a load balancer in
		// front of a restarting server gives, and the test's log stays quiet about it.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.cutOff.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		},
	})
	t.Cleanup(s.proxy.Close)
	s.start()
	t.Cleanup(s.kill)
	if err := s.client().MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{Region: clusterS3Region}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	return s
}

// cut is one upload to interrupt: started is closed once the server has received part
// of its body, and the rest is held back until release is closed.
type cut struct {
	started, release chan struct{}
}

// watchedBody is an upload's body on its way through the proxy. When the proxy is armed,
// the first part of a multipart upload to read from it becomes the cut one: it passes at
// most half of its bytes, says so, and holds the rest back until the test has restarted
// the server, so that the server dies with the part certainly half-received and its
// upload open.
type watchedBody struct {
	io.ReadCloser
	s    *s3Server
	size int64
	part bool // a part of a multipart upload, not a single PUT
	sent int64
	cut  *cut
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.cut != nil && b.sent > 0 {
		<-b.cut.release
		b.cut = nil
	}
	if b.sent == 0 && b.size > 1 && b.part {
		b.s.mu.Lock()
		b.cut, b.s.armed = b.s.armed, nil
		b.s.mu.Unlock()
		if b.cut != nil {
			p = p[:min(int64(len(p)), b.size/2)]
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.sent += int64(n)
	if b.cut != nil && n > 0 {
		close(b.cut.started)
	}
	return n, err
}

// armMidUpload makes the next part upload the cut one (watchedBody) and returns a channel
// closed once the server holds some of it, and release, which lets the rest go on.
func (s *s3Server) armMidUpload() (started <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &cut{started: make(chan struct{}), release: make(chan struct{})}
	s.armed = c
	return c.started, func() { close(c.release) }
}

// endpoint is the URL the nodes and the checker use: the proxy's.
func (s *s3Server) endpoint() string { return s.proxy.URL }

// filesURL is the --files URL of prefix in bucket.
func (s *s3Server) filesURL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.endpoint()}, "region": {clusterS3Region}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// env is what a node needs to sign its requests.
func (s *s3Server) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + clusterS3Access, "AWS_SECRET_ACCESS_KEY=" + clusterS3Secret}
}

func (s *s3Server) client() *minio.Client {
	s.t.Helper()
	u, _ := url.Parse(s.endpoint())
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(clusterS3Access, clusterS3Secret, ""),
		Region:       clusterS3Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// start runs versitygw on a free port over the same directory and waits until it answers.
func (s *s3Server) start() {
	t := s.t
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(s.bin, "--port", "127.0.0.1:"+port, "posix", s.dir)
	// Keys through the environment, as .ci/s3 does, so that they stay out of ps.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+clusterS3Access,
		"ROOT_SECRET_ACCESS_KEY="+clusterS3Secret, "VGW_REGION="+clusterS3Region)
	s.mu.Lock()
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &s.mu, w: &s.log}, &lockedWriter{mu: &s.mu, w: &s.log}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	s.target.Store(&url.URL{Scheme: "http", Host: "127.0.0.1:" + port})
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Any HTTP answer means it listens: an anonymous request gets 403.
		if res, err := http.Get("http://127.0.0.1:" + port + "/"); err == nil {
			res.Body.Close()
			return
		}
		select {
		case <-done:
			t.Fatalf("versitygw exited at start:\n%s", s.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not answer in time:\n%s", s.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL: the state it keeps is its directory.
func (s *s3Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// restart kills the server and starts it again over the same data.
func (s *s3Server) restart() {
	s.kill()
	s.start()
	s.mu.Lock()
	s.restarts++
	s.mu.Unlock()
}

func (s *s3Server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// randomName is a lower-case name no other run uses (a bucket, a node's suffix).
func randomName(prefix string) string { return prefix + strings.ToLower(rand.Text()[:12]) }

// processPortsTo lists the local ports of pid's TCP connections to remotePort.
func processPortsTo(pid, remotePort int) []int32 {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int32
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fl := strings.Fields(sc.Text())
			if len(fl) < 10 || !inodes[fl[9]] {
				continue
			}
			local, remote := hexPort(fl[1]), hexPort(fl[2])
			if remote == remotePort && local > 0 {
				ports = append(ports, int32(local))
			}
		}
		f.Close()
	}
	return ports
}

// hexPort reads the port of /proc/net/tcp's "ADDR:PORT" (hexadecimal).
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return 0
	}
	return int(p)
}
