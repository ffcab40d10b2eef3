package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/apptest"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/store"
)

// TestUploadRidesOutABucketOutage: a bucket that resets every connection while an export
// uploads its file, for longer than all the export's attempts would last if each failed
// at its upload, does not spend them: the upload is retried inside the attempt, and once
// the bucket is back the export succeeds on attempt 1 with its file intact.
func TestUploadRidesOutABucketOutage(t *testing.T) {
	b := objstoretest.Bucket(t)
	pb, proxy := b.Proxy(t)
	ts := newTestServer(t, testOpts{Files: pb.URL("team"), FilesAccessKey: b.AccessKey, FilesSecretKey: b.SecretKey})

	proxy.Down()
	j := ts.Create(`{"report":"demo","params":{"rows":2000}}`)
	uploads := func() int {
		n := 0
		for _, line := range proxy.Dropped() {
			if strings.HasPrefix(line, "PUT ") && strings.Contains(line, "/exports/"+j.ID+"/") {
				n++
			}
		}
		return n
	}
	// An attempt that fails at its upload sends it once (the body is a stream, which the
	// client does not resend): twice as many refused uploads as the export has attempts
	// is an outage longer than all of them together.
	want := 2 * store.DefaultMaxAttempts
	var now store.Job
	apptest.WaitFor(t, 60*time.Second, func() (bool, string) {
		var err error
		if now, err = ts.store.Get(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
		return uploads() >= want || now.Status.Final(),
			fmt.Sprintf("%d uploads refused, want %d; the export is %s (attempt %d)", uploads(), want, now.Status, now.Attempt)
	})
	if now.Status != store.StatusProcessing || now.Attempt != 1 {
		t.Fatalf("after %d refused uploads the export is %s on attempt %d (%s), want still PROCESSING on attempt 1",
			uploads(), now.Status, now.Attempt, now.ErrorMessage)
	}
	proxy.Up()

	done, _ := ts.WaitStatus(j.ID, store.StatusSucceeded, store.StatusFailed)
	if done.Status != string(store.StatusSucceeded) || done.Attempt != 1 || done.File == nil {
		t.Fatalf("export %+v, want SUCCEEDED on attempt 1 with a file", done)
	}
	file := ts.Get("/api/v1/exports/" + j.ID + "/file")
	if file.StatusCode != http.StatusOK {
		t.Fatalf("download: %d %s", file.StatusCode, file.Body)
	}
	if sum := sha256.Sum256(file.Body); hex.EncodeToString(sum[:]) != done.File.SHA256 || int64(len(file.Body)) != done.File.Size {
		t.Fatalf("downloaded %d bytes whose sha256 is not the recorded one (%d bytes, %s)", len(file.Body), done.File.Size, done.File.SHA256)
	}
	if rows := sheetRows(t, file.Body); len(rows) != 2001 {
		t.Fatalf("the file has %d rows, want 2001 (header and 2000)", len(rows))
	}
}

// TestStartRefusesAMissingBucket: a node whose --files names a bucket that does not
// exist refuses to start, with one line naming the bucket, rather than start, answer
// /readyz 200 and fail every export at its upload.
func TestStartRefusesAMissingBucket(t *testing.T) {
	env := objstoretest.Server(t)
	env.Bucket = "sheetq-test-missing-" + strings.ToLower(rand.Text()[:12])
	cfg := testConfig(t, testOpts{Files: env.URL("team"), FilesAccessKey: env.AccessKey, FilesSecretKey: env.SecretKey})
	a, err := New(context.Background(), cfg)
	if err == nil {
		a.Stop()
		t.Fatal("New started on a bucket that does not exist")
	}
	if msg := err.Error(); !strings.Contains(msg, `bucket "`+env.Bucket+`" does not exist`) || strings.Contains(msg, "\n") {
		t.Fatalf("error %q, want one line saying that bucket %s does not exist", msg, env.Bucket)
	}
}

// TestReadyzFollowsTheBucket: /readyz answers 503 files_unavailable while the bucket
// cannot be written, whether it was removed or its server stopped answering, and 200
// again once it is back; the probe's answer is kept for seconds, so each change shows
// within them.
func TestReadyzFollowsTheBucket(t *testing.T) {
	b := objstoretest.Bucket(t)
	pb, proxy := b.Proxy(t)
	ts := newTestServer(t, testOpts{Files: pb.URL("team"), FilesAccessKey: b.AccessKey, FilesSecretKey: b.SecretKey})
	ready := func(want int) {
		t.Helper()
		apptest.WaitFor(t, 30*time.Second, func() (bool, string) {
			res := ts.Get("/readyz")
			if res.StatusCode == http.StatusServiceUnavailable {
				var p struct{ Code string }
				if err := json.Unmarshal(res.Body, &p); err != nil || p.Code != "files_unavailable" ||
					res.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("/readyz: 503 %q %s, want problem+json files_unavailable", res.Header.Get("Content-Type"), res.Body)
				}
			}
			return res.StatusCode == want, fmt.Sprintf("/readyz answers %d %s, want %d", res.StatusCode, res.Body, want)
		})
	}
	ready(http.StatusOK)

	c := b.Client(t)
	if err := c.RemoveBucket(context.Background(), b.Bucket); err != nil {
		t.Fatalf("remove the bucket: %v", err)
	}
	ready(http.StatusServiceUnavailable)
	if err := c.MakeBucket(context.Background(), b.Bucket, minio.MakeBucketOptions{Region: b.Region}); err != nil {
		t.Fatalf("make the bucket again: %v", err)
	}
	ready(http.StatusOK)

	proxy.Down()
	ready(http.StatusServiceUnavailable)
	proxy.Up()
	ready(http.StatusOK)
}
