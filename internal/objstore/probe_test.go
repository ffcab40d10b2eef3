package objstore

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/objstore/objstoretest"
)

// Probe writes and deletes its object, leaving the bucket as it was; on a bucket that
// does not exist it is ErrNoBucket, naming the bucket, and not Transient.
func TestProbe(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	for range 2 { // the second meets no leftover of the first
		if err := s.Probe(t.Context(), "probe/node-1"); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	if objs, err := s.List(t.Context(), ""); err != nil || len(objs) != 0 {
		t.Fatalf("bucket after the probes: %+v, %v; want it empty", objs, err)
	}

	env := objstoretest.Server(t)
	missing, err := New(Config{Bucket: "sheetq-test-no-such-bucket", Prefix: "p/", Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	err = missing.Probe(t.Context(), "probe/node-1")
	if !errors.Is(err, ErrNoBucket) || err.Error() != `bucket "sheetq-test-no-such-bucket" does not exist` || Transient(err) {
		t.Fatalf("Probe of a missing bucket = %v (transient %v), want ErrNoBucket naming it, not transient", err, Transient(err))
	}
}

// Transient tells an error that may pass (the server unreachable, a 5xx, a throttle)
// from one that will not (a refusal, a missing bucket or key, a local error), on the
// errors a real server and a real network give and on the shapes they come in.
func TestTransient(t *testing.T) {
	t.Parallel()
	env := objstoretest.Bucket(t)
	store := func(endpoint, secret string) *Store {
		s, err := New(Config{Bucket: env.Bucket, Endpoint: endpoint, Region: env.Region, AccessKey: env.AccessKey, SecretKey: secret})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	put := func(s *Store, key string) error {
		body := []byte("x")
		return s.PutIfAbsent(t.Context(), key, bytes.NewReader(body), 1, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
	}))
	t.Cleanup(unavailable.Close)

	good := store(env.Endpoint, env.SecretKey)
	if err := put(good, "k"); err != nil {
		t.Fatal(err)
	}
	_, statErr := good.Stat(t.Context(), "missing")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", put(store(refused, env.SecretKey), "k"), true},
		{"503 SlowDown", put(store(unavailable.URL, env.SecretKey), "k"), true},
		{"a wrong key (403)", put(store(env.Endpoint, "wrong-secret"), "k2"), false},
		{"the key is taken", put(good, "k"), false},
		{"a missing key", statErr, false},
		{"no error", nil, false},
		{"reset", fmt.Errorf("put k: %w", &url.Error{Op: "Put", URL: "http://x", Err: syscall.ECONNRESET}), true},
		{"500", fmt.Errorf("put k: %w", minio.ErrorResponse{StatusCode: 500, Code: "InternalError"}), true},
		{"RequestTimeout", minio.ErrorResponse{StatusCode: 400, Code: "RequestTimeout"}, true},
		{"429", minio.ErrorResponse{StatusCode: 429}, true},
		{"NoSuchBucket", minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket"}, false},
		{"AccessDenied", minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, false},
		{"bad certificate", &url.Error{Op: "Put", URL: "https://x", Err: x509.UnknownAuthorityError{}}, false},
		{"a local file", fmt.Errorf("read part 1: %w", &fs.PathError{Op: "read", Path: "/tmp/x", Err: syscall.EIO}), false},
		{"canceled", context.Canceled, false},
	} {
		if tc.err == nil && tc.name != "no error" {
			t.Errorf("%s: no error to classify", tc.name)
			continue
		}
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
