// Package objstoretest gives tests a bucket of their own on the S3-compatible test server
// that .ci/s3 starts (SHEETQ_TEST_S3_*), and removes it with everything in it when the
// test ends. It talks to the server with minio-go directly rather than through objstore,
// so that objstore's own tests can use it too.
package objstoretest

import (
	"cmp"
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"

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
