package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/objstore/objstoretest"
)

// newTestStore returns a Store on a bucket of its own (objstoretest.Bucket: a random
// name, removed with everything in it when the test ends) under the prefix "p/".
func newTestStore(t *testing.T) *Store { return newTestStoreWith(t, nil) }

// newTestStoreWith is newTestStore with the Config changed by edit first (a part size, a
// hook).
func newTestStoreWith(t *testing.T, edit func(*Config)) *Store {
	t.Helper()
	env := objstoretest.Bucket(t)
	cfg := Config{Bucket: env.Bucket, Prefix: "p/", Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomBytes(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

func mustPut(t *testing.T, s *Store, key string, data []byte, sum string) {
	t.Helper()
	if err := s.PutIfAbsent(t.Context(), key, bytes.NewReader(data), int64(len(data)), sum); err != nil {
		t.Fatalf("PutIfAbsent(%s): %v", key, err)
	}
}

func mustRead(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, info, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	size := info.Size
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if int64(len(got)) != size {
		t.Fatalf("Open(%s) said %d bytes, read %d", key, size, len(got))
	}
	return got
}

func TestPutOpenRoundTrip(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	// Past one 64 KiB chunk of the streaming signature, so that chunking is exercised.
	data, sum := randomBytes(t, 300<<10)
	mustPut(t, s, "exports/1/1.xlsx", data, sum)

	got := mustRead(t, s, "exports/1/1.xlsx")
	gotSum := sha256.Sum256(got)
	if !bytes.Equal(got, data) || hex.EncodeToString(gotSum[:]) != sum {
		t.Fatalf("read back %d bytes with sha256 %x; want %d bytes with %s", len(got), gotSum, len(data), sum)
	}
	info, err := s.Stat(t.Context(), "exports/1/1.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.SHA256 != sum || info.Key != "exports/1/1.xlsx" {
		t.Fatalf("Stat = %+v; want size %d and sha256 %s", info, len(data), sum)
	}

	// The prefix is the store's: the object sits under p/ in the bucket.
	if _, err := s.client.StatObject(t.Context(), s.bucket, "p/exports/1/1.xlsx", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("object not under the prefix: %v", err)
	}

	// Open says what Stat says, and its reader seeks, as an HTTP Range request needs.
	rc, oinfo, err := s.Open(t.Context(), "exports/1/1.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if oinfo.Size != info.Size || oinfo.SHA256 != sum || oinfo.Modified.IsZero() {
		t.Fatalf("Open's info = %+v; want %+v", oinfo, info)
	}
	if _, err := rc.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 500)
	if _, err := io.ReadFull(rc, tail); err != nil || !bytes.Equal(tail, data[1000:1500]) {
		t.Fatalf("read after Seek(1000): %v; the bytes differ from the object's", err)
	}
}

func TestPutIfAbsentRefusesSecondPut(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	first, firstSum := randomBytes(t, 1000)
	second, secondSum := randomBytes(t, 2000)
	mustPut(t, s, "exports/7/1.xlsx", first, firstSum)

	err := s.PutIfAbsent(t.Context(), "exports/7/1.xlsx", bytes.NewReader(second), int64(len(second)), secondSum)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second PutIfAbsent: %v; want ErrExists", err)
	}
	if got := mustRead(t, s, "exports/7/1.xlsx"); !bytes.Equal(got, first) {
		t.Fatalf("the second put changed the object: %d bytes; want the first %d", len(got), len(first))
	}
	if info, err := s.Stat(t.Context(), "exports/7/1.xlsx"); err != nil || info.SHA256 != firstSum {
		t.Fatalf("Stat = %+v, %v; want the first put's sha256 %s", info, err, firstSum)
	}
}

// An object larger than a part goes up as a multipart upload, where If-None-Match rides
// on the completing request. AfterPart hears of each part while the upload is still
// open, so that a crash test killing the process there leaves an incomplete upload.
func TestPutIfAbsentMultipart(t *testing.T) {
	t.Parallel()
	var (
		parts []int
		open  []int // incomplete uploads under the prefix, seen from inside AfterPart
		s     *Store
	)
	s = newTestStoreWith(t, func(c *Config) {
		c.PartSize = MinPartSize
		c.AfterPart = func(n int) {
			parts = append(parts, n)
			uploads := 0
			for up := range s.client.ListIncompleteUploads(t.Context(), s.bucket, s.prefix, true) {
				if up.Err != nil {
					t.Errorf("list incomplete uploads: %v", up.Err)
				}
				uploads++
			}
			open = append(open, uploads)
		}
	})
	first, firstSum := randomBytes(t, MinPartSize+1<<20)
	second, secondSum := randomBytes(t, MinPartSize+1<<20)
	mustPut(t, s, "exports/6/1.xlsx", first, firstSum)
	if !slices.Equal(parts, []int{1, 2}) || !slices.Equal(open, []int{1, 1}) {
		t.Fatalf("AfterPart saw parts %v with %v incomplete uploads; want parts [1 2], each with its upload open", parts, open)
	}
	// S3's ETag of an object made by a multipart upload ends in -<parts>.
	st, err := s.client.StatObject(t.Context(), s.bucket, "p/exports/6/1.xlsx", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(st.ETag, "-2") {
		t.Fatalf("ETag %q: want a two-part upload's, ending in -2", st.ETag)
	}

	parts = nil
	err = s.PutIfAbsent(t.Context(), "exports/6/1.xlsx", bytes.NewReader(second), int64(len(second)), secondSum)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second multipart PutIfAbsent: %v; want ErrExists", err)
	}
	if !slices.Equal(parts, []int{1, 2}) {
		t.Fatalf("the second put's AfterPart saw parts %v; want [1 2] (refused only at completion)", parts)
	}
	if got := mustRead(t, s, "exports/6/1.xlsx"); !bytes.Equal(got, first) {
		t.Fatal("the second multipart put changed the object")
	}
	for up := range s.client.ListIncompleteUploads(t.Context(), s.bucket, "", true) {
		t.Fatalf("the refused put left its upload behind: %+v", up)
	}
	if info, err := s.Stat(t.Context(), "exports/6/1.xlsx"); err != nil || info.SHA256 != firstSum || info.Size != int64(len(first)) {
		t.Fatalf("Stat = %+v, %v; want the first put's size and sha256", info, err)
	}

	// An object of one part or less is a single PUT: AfterPart is not called.
	parts = nil
	small, smallSum := randomBytes(t, 1000)
	mustPut(t, s, "exports/6/2.xlsx", small, smallSum)
	if len(parts) != 0 {
		t.Fatalf("a %d-byte put called AfterPart with %v; want a single PUT", len(small), parts)
	}
}

// A put cut short between two parts (its context ends, as when a node stops) aborts its
// upload instead of leaving the first part behind.
func TestPutIfAbsentMultipartCutShort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := newTestStoreWith(t, func(c *Config) {
		c.PartSize = MinPartSize
		c.AfterPart = func(n int) {
			if n == 1 {
				cancel()
			}
		}
	})
	data, sum := randomBytes(t, MinPartSize+1<<20)
	if err := s.PutIfAbsent(ctx, "exports/9/1.xlsx", bytes.NewReader(data), int64(len(data)), sum); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutIfAbsent cut after part 1: %v; want context.Canceled", err)
	}
	for up := range s.client.ListIncompleteUploads(t.Context(), s.bucket, "", true) {
		t.Fatalf("the cut put left its upload behind: %+v", up)
	}
	if _, err := s.Stat(t.Context(), "exports/9/1.xlsx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat after the cut put: %v; want ErrNotFound", err)
	}
}

// A part smaller than S3's smallest goes up, and the upload stays open until it would
// complete, where the server refuses it: what a crash test that kills its process
// between two small parts relies on; the failed put aborts its upload.
func TestPutIfAbsentSmallParts(t *testing.T) {
	t.Parallel()
	var parts []int
	s := newTestStoreWith(t, func(c *Config) {
		c.PartSize = 64 << 10
		c.AfterPart = func(n int) { parts = append(parts, n) }
	})
	data, sum := randomBytes(t, 150<<10)
	if err := s.PutIfAbsent(t.Context(), "exports/4/1.xlsx", bytes.NewReader(data), int64(len(data)), sum); err == nil {
		t.Fatal("a put in parts of 64 KiB completed; want the server to refuse parts below MinPartSize")
	}
	if !slices.Equal(parts, []int{1, 2, 3}) {
		t.Fatalf("AfterPart saw parts %v; want [1 2 3]", parts)
	}
	for up := range s.client.ListIncompleteUploads(t.Context(), s.bucket, "", true) {
		t.Fatalf("the refused put left its upload behind: %+v", up)
	}
	if _, err := New(Config{Bucket: "bkt", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s", PartSize: -1}); err == nil {
		t.Error("New with PartSize -1 accepted")
	}
}

func TestPutIfAbsentChecksTheHash(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	data, _ := randomBytes(t, 1000)
	_, otherSum := randomBytes(t, 10)
	if err := s.PutIfAbsent(t.Context(), "exports/8/1.xlsx", bytes.NewReader(data), int64(len(data)), otherSum); err == nil {
		t.Fatal("PutIfAbsent with the wrong sha256 succeeded")
	}
	if _, err := s.Stat(t.Context(), "exports/8/1.xlsx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat after a refused put: %v; want ErrNotFound (no object left to trust)", err)
	}
	if err := s.PutIfAbsent(t.Context(), "exports/8/1.xlsx", bytes.NewReader(data), int64(len(data)), "abc"); err == nil {
		t.Fatal("PutIfAbsent with a malformed sha256 succeeded")
	}
}

func TestPresignGet(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	data, sum := randomBytes(t, 5000)
	other, otherSum := randomBytes(t, 10)
	mustPut(t, s, "exports/9/1.xlsx", data, sum)
	mustPut(t, s, "exports/9/2.xlsx", other, otherSum)
	const name = `Sales "Q1" März.xlsx`
	const xlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

	link, err := s.PresignGet(t.Context(), "exports/9/1.xlsx", 10*time.Minute, name, xlsx)
	if err != nil {
		t.Fatal(err)
	}
	resp := get(t, link)
	if resp.status != http.StatusOK || !bytes.Equal(resp.body, data) {
		t.Fatalf("GET presigned: %d, %d bytes; want 200 and the %d bytes", resp.status, len(resp.body), len(data))
	}
	disp, params, err := mime.ParseMediaType(resp.header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || params["filename"] != name {
		t.Fatalf("Content-Disposition %q (%v); want attachment with filename %q", resp.header.Get("Content-Disposition"), err, name)
	}
	if ct := resp.header.Get("Content-Type"); ct != xlsx {
		t.Fatalf("Content-Type %q; want %q", ct, xlsx)
	}

	t.Run("tampered signature", func(t *testing.T) {
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		sig := []byte(q.Get("X-Amz-Signature"))
		if len(sig) == 0 {
			t.Fatalf("no X-Amz-Signature in %s", link)
		}
		sig[0] = map[bool]byte{true: '1', false: '0'}[sig[0] == '0']
		q.Set("X-Amz-Signature", string(sig))
		u.RawQuery = q.Encode()
		if resp := get(t, u.String()); resp.status != http.StatusForbidden {
			t.Fatalf("tampered signature: %d; want 403", resp.status)
		}
	})
	t.Run("tampered key", func(t *testing.T) {
		// Another object that exists, so that only the signature can refuse it.
		tampered := strings.Replace(link, "/exports/9/1.xlsx?", "/exports/9/2.xlsx?", 1)
		if tampered == link {
			t.Fatalf("key not found in %s", link)
		}
		if resp := get(t, tampered); resp.status != http.StatusForbidden || bytes.Equal(resp.body, other) {
			t.Fatalf("tampered key: %d; want 403", resp.status)
		}
	})
	t.Run("tampered file name", func(t *testing.T) {
		u, _ := url.Parse(link)
		q := u.Query()
		q.Set("response-content-disposition", `attachment; filename="evil.exe"`)
		u.RawQuery = q.Encode()
		if resp := get(t, u.String()); resp.status != http.StatusForbidden {
			t.Fatalf("tampered Content-Disposition: %d; want 403", resp.status)
		}
	})
	t.Run("tampered content type", func(t *testing.T) {
		u, _ := url.Parse(link)
		q := u.Query()
		q.Set("response-content-type", "text/html")
		u.RawQuery = q.Encode()
		if resp := get(t, u.String()); resp.status != http.StatusForbidden {
			t.Fatalf("tampered Content-Type: %d; want 403", resp.status)
		}
	})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// get is a plain http.Get, as a browser following a redirect would do it: no credentials.
func get(t *testing.T, link string) response {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, body}
}

func TestMissingKey(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	if _, _, err := s.Open(t.Context(), "exports/404/1.xlsx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a missing key: %v; want ErrNotFound", err)
	}
	if _, err := s.Stat(t.Context(), "exports/404/1.xlsx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a missing key: %v; want ErrNotFound", err)
	}
}

func TestListAndDelete(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	keys := []string{"exports/1/1.xlsx", "exports/1/2.xlsx", "exports/2/1.xlsx"}
	for i, k := range keys {
		data, sum := randomBytes(t, 10+i)
		mustPut(t, s, k, data, sum)
	}
	// An object beside the prefix is not the store's.
	if _, err := s.client.PutObject(t.Context(), s.bucket, "other/x", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	listKeys := func(prefix string) []string {
		t.Helper()
		infos, err := s.List(t.Context(), prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		var out []string
		for _, in := range infos {
			out = append(out, in.Key)
		}
		return out
	}
	if got := listKeys(""); !slices.Equal(got, keys) {
		t.Fatalf("List(\"\") = %q; want %q", got, keys)
	}
	if got := listKeys("exports/1/"); !slices.Equal(got, keys[:2]) {
		t.Fatalf("List(exports/1/) = %q; want %q", got, keys[:2])
	}
	if infos, _ := s.List(t.Context(), "exports/2/"); len(infos) != 1 || infos[0].Size != 12 {
		t.Fatalf("List(exports/2/) = %+v; want one object of 12 bytes", infos)
	}

	if err := s.Delete(t.Context(), "exports/1/1.xlsx"); err != nil {
		t.Fatal(err)
	}
	if got := listKeys("exports/1/"); !slices.Equal(got, keys[1:2]) {
		t.Fatalf("after Delete, List(exports/1/) = %q; want %q", got, keys[1:2])
	}
	if _, _, err := s.Open(t.Context(), "exports/1/1.xlsx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open after Delete: %v; want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "exports/1/1.xlsx"); err != nil {
		t.Fatalf("second Delete: %v; want nil", err)
	}
}

func TestAbortStaleUploads(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	core := minio.Core{Client: s.client}
	id, err := core.NewMultipartUpload(t.Context(), s.bucket, "p/exports/5/1.xlsx", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.PutObjectPart(t.Context(), s.bucket, "p/exports/5/1.xlsx", id, 1, bytes.NewReader([]byte("part")), 4, minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}

	if n, err := s.AbortStaleUploads(t.Context(), time.Hour); err != nil || n != 0 {
		t.Fatalf("AbortStaleUploads(1h) = %d, %v; want 0 (the upload is fresh)", n, err)
	}
	// A negative age puts the cut-off in the future, so the upload just made is stale
	// whatever the rounding of the server's timestamps.
	if n, err := s.AbortStaleUploads(t.Context(), -time.Minute); err != nil || n != 1 {
		t.Fatalf("AbortStaleUploads(-1m) = %d, %v; want 1", n, err)
	}
	for up := range s.client.ListIncompleteUploads(t.Context(), s.bucket, "", true) {
		t.Fatalf("upload left after AbortStaleUploads: %+v", up)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want Config
	}{
		{"s3://bucket", Config{Bucket: "bucket"}},
		{"s3://bucket/", Config{Bucket: "bucket"}},
		{"s3://my-bucket/sheetq/prod/", Config{Bucket: "my-bucket", Prefix: "sheetq/prod/"}},
		{"s3://bk1/pre?endpoint=http://127.0.0.1:9000&region=eu-west-3",
			Config{Bucket: "bk1", Prefix: "pre/", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-3"}},
		{"s3://bk1?endpoint=https://s3.example.com", Config{Bucket: "bk1", Endpoint: "https://s3.example.com"}},
	}
	for _, tc := range good {
		got, err := ParseURL(tc.in)
		// Config holds a func (AfterPart), so it is compared field by field.
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"",
		"http://bucket/x",
		"s3:///prefix",
		"s3://Bad_Bucket/x",
		"s3://key:secret@bucket/x",
		"s3://bucket?endpoint=127.0.0.1:9000",
		"s3://bucket?endpoint=ftp://host",
		"s3://bucket?endpoint=http://host/path",
		"s3://bucket?regoin=eu-west-1",
		"s3://bucket?region=a&region=b",
	} {
		if got, err := ParseURL(in); err == nil {
			t.Errorf("ParseURL(%q) = %+v; want an error", in, got)
		}
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Bucket: "bkt", Prefix: "p/", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "/abs", "dir/", "a//b", "a/../b", "./a"} {
		if _, err := s.name(k); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
	if n, err := s.name("exports/1/2.xlsx"); err != nil || n != "p/exports/1/2.xlsx" {
		t.Errorf("name = %q, %v", n, err)
	}
}
