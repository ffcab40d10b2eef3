// Package objstoretest gives tests a bucket of their own on the S3-compatible test server
// that .ci/s3 starts (SHEETQ_TEST_S3_*), and removes it with everything in it when the
// test ends. It talks to the server with minio-go directly rather than through objstore,
// so that objstore's own tests can use it too.
package objstoretest

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Env is the test server and one bucket on it.
type Env struct {
	// Endpoint is the server's URL (http://host:port).
	Endpoint string
	// AccessKey and SecretKey are the server's credentials.
	AccessKey, SecretKey string
	// Region signs requests.
	Region string
	// Bucket is the test's own bucket.
	Bucket string
}

// URL is the file store URL (--files) of prefix in the bucket; prefix may be "".
func (e Env) URL(prefix string) string {
	q := url.Values{"endpoint": {e.Endpoint}, "region": {e.Region}}
	return "s3://" + e.Bucket + "/" + prefix + "?" + q.Encode()
}

// Server returns the test server's settings from SHEETQ_TEST_S3_*, skipping the test
// without them, except in CI, where .ci/s3 has started the server and a missing variable
// is a broken setup.
func Server(t testing.TB) Env {
	t.Helper()
	e := Env{
		Endpoint:  os.Getenv("SHEETQ_TEST_S3_ENDPOINT"),
		AccessKey: os.Getenv("SHEETQ_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("SHEETQ_TEST_S3_SECRET_KEY"),
		Region:    cmp.Or(os.Getenv("SHEETQ_TEST_S3_REGION"), "us-east-1"),
	}
	if e.Endpoint == "" || e.AccessKey == "" || e.SecretKey == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_S3_ENDPOINT, _ACCESS_KEY or _SECRET_KEY is not set; CI runs .ci/s3 first")
		}
		t.Skip(`SHEETQ_TEST_S3_* is not set; s3env=$(bash .ci/s3) && eval "$s3env" to run this test`)
	}
	return e
}

// Bucket makes a bucket with a random name (so that runs can share a server) and removes
// it, with its objects and unfinished uploads, when the test ends.
func Bucket(t testing.TB) Env {
	t.Helper()
	e := Server(t)
	e.Bucket = "sheetq-test-" + strings.ToLower(rand.Text()[:16])
	c := e.Client(t)
	if err := c.MakeBucket(context.Background(), e.Bucket, minio.MakeBucketOptions{Region: e.Region}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx := context.Background()
		for obj := range c.ListObjectsIter(ctx, e.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				t.Errorf("cleanup: list: %v", obj.Err)
				break
			}
			if err := c.RemoveObject(ctx, e.Bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
				t.Errorf("cleanup: remove %s: %v", obj.Key, err)
			}
		}
		for up := range c.ListIncompleteUploads(ctx, e.Bucket, "", true) {
			if up.Err == nil {
				_ = c.RemoveIncompleteUpload(ctx, e.Bucket, up.Key)
			}
		}
		if err := c.RemoveBucket(ctx, e.Bucket); err != nil {
			t.Errorf("cleanup: remove bucket: %v", err)
		}
	})
	return e
}

// Client is a minio-go client of the server with path-style addressing, for what a test
// checks behind the file store's back (an upload left unfinished, an object's headers).
func (e Env) Client(t testing.TB) *minio.Client {
	t.Helper()
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(e.AccessKey, e.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       e.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Proxy is a loopback TCP proxy in front of the test server that a test can take down
// and bring back: an outage of the bucket that the test starts and ends on conditions
// it chooses, without stopping the server other tests share.
type Proxy struct {
	l      net.Listener
	target string // the server's host:port

	mu      sync.Mutex
	down    bool
	dropped []string              // the request line of each connection reset while down
	open    map[net.Conn]net.Conn // each client connection and its server connection
}

// Proxy starts a proxy to e's server and returns e with the proxy as its Endpoint (the
// same bucket and keys); the proxy stops when the test ends.
func (e Env) Proxy(t testing.TB) (Env, *Proxy) {
	t.Helper()
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: u.Host, open: map[net.Conn]net.Conn{}}
	go p.serve()
	t.Cleanup(p.close)
	e.Endpoint = u.Scheme + "://" + l.Addr().String()
	return e, p
}

// Down resets every open connection, and every new one until Up: to a client, the
// server has gone away ("connection reset by peer").
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c, s := range p.open {
		reset(c)
		s.Close()
	}
	clear(p.open)
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Dropped returns the request line ("PUT /bucket/key HTTP/1.1") of each new connection
// reset while the proxy was down, so that a test can tell an upload from a listing.
func (p *Proxy) Dropped() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.dropped)
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.pass(c)
	}
}

// pass carries one connection to the server, unless the proxy is down.
func (p *Proxy) pass(c net.Conn) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		// The client sends its request at once; it is read only to be named.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReaderSize(c, 4096).ReadString('\n')
		p.mu.Lock()
		p.dropped = append(p.dropped, strings.TrimSpace(line))
		p.mu.Unlock()
		reset(c)
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(c)
		return
	}
	p.mu.Lock()
	if p.down { // went down while dialling
		p.mu.Unlock()
		reset(c)
		s.Close()
		return
	}
	p.open[c] = s
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done // either side ended: end both
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.l.Close()
	p.Down()
}

// reset closes c with a TCP RST rather than a FIN, as a server that has gone away does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
