package jobs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/internal/objstore/objstoretest"
)

// Tests of S3Files.Put's retries of an upload, behind objstoretest.Proxy: a bucket the
// test takes down and brings back. The export-level proof (an outage outlasting every
// attempt, and the export succeeding on attempt 1) is app.TestUploadRidesOutABucketOutage.

// proxiedS3 is an S3Files on a bucket of its own behind a proxy, and a part file of n
// random bytes with its sha256.
func proxiedS3(t *testing.T, n int) (*S3Files, *objstoretest.Proxy, string, string) {
	t.Helper()
	env, proxy := objstoretest.Bucket(t).Proxy(t)
	f, err := OpenFiles(env.URL("p/"), t.TempDir(), env.AccessKey, env.SecretKey, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, n)
	_, _ = rand.Read(body)
	src := filepath.Join(t.TempDir(), "part")
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	return f.(*S3Files), proxy, src, hex.EncodeToString(sum[:])
}

// puts counts the refused uploads to key.
func puts(p *objstoretest.Proxy, key string) int {
	n := 0
	for _, line := range p.Dropped() {
		if strings.HasPrefix(line, "PUT ") && strings.Contains(line, "/"+key+" ") {
			n++
		}
	}
	return n
}

// An upload that keeps failing is retried with growing waits for uploadRetryBudget in
// all, then fails the attempt, saying how long the bucket failed.
func TestS3PutRetriesForItsBudget(t *testing.T) {
	t.Parallel()
	s, proxy, src, sum := proxiedS3(t, 1000)
	// A clock that the waits move, so that the budget passes at once.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	s.now = func() time.Time { return now }
	s.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		now = now.Add(d)
		return ctx.Err()
	}
	proxy.Down()
	const key = "exports/job1/1.xlsx"
	_, err := s.Put(t.Context(), key, src, 1000, sum)
	if err == nil || !strings.Contains(err.Error(), "the bucket failed for") {
		t.Fatalf("Put on a bucket that never answers = %v, want the budget's error", err)
	}
	var total time.Duration
	for i, d := range waits {
		if want := min(uploadRetryFirst<<i, uploadRetryMax); d != want {
			t.Fatalf("wait %d = %s, want %s (all: %v)", i+1, d, want, waits)
		}
		total += d
	}
	if total > uploadRetryBudget || total+uploadRetryMax <= uploadRetryBudget {
		t.Fatalf("waited %s in all (%v), want just under the budget %s", total, waits, uploadRetryBudget)
	}
	if got := puts(proxy, key); got != len(waits)+1 {
		t.Fatalf("%d uploads reached the proxy, want one per try (%d)", got, len(waits)+1)
	}
}

// The retries end with the attempt's context (a cancel, a lost lease: Engine.put cancels
// it): Put returns, and nothing is uploaded after it; once the bucket is back, the key
// holds nothing.
func TestS3PutRetriesStopWithTheAttempt(t *testing.T) {
	t.Parallel()
	s, proxy, src, sum := proxiedS3(t, 1000)
	proxy.Down()
	const key = "exports/job2/1.xlsx"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, key, src, 1000, sum)
		done <- err
	}()
	for puts(proxy, key) < 2 { // a retry has happened: Put is in its loop
		select {
		case err := <-done:
			t.Fatalf("Put returned %v before it retried", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Put succeeded on a bucket that is down")
	}
	tried := puts(proxy, key)
	proxy.Up()
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after the cancelled upload = %v, want no object", err)
	}
	if got := puts(proxy, key); got != tried {
		t.Fatalf("%d uploads after Put returned", got-tried)
	}
}

// A refusal that will not pass (a wrong key: 403) fails at once, without retries.
func TestS3PutDoesNotRetryARefusal(t *testing.T) {
	t.Parallel()
	env := objstoretest.Bucket(t)
	f, err := OpenFiles(env.URL("p/"), t.TempDir(), env.AccessKey, "wrong-secret", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s := f.(*S3Files)
	slept := 0
	s.sleep = func(context.Context, time.Duration) error { slept++; return nil }
	src := filepath.Join(t.TempDir(), "part")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "exports/job3/1.xlsx", src, 1, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"); err == nil || slept != 0 {
		t.Fatalf("Put with a wrong key = %v after %d waits, want an error and no retry", err, slept)
	}
}
