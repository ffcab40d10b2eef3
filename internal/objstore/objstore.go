// Package objstore is a small client for one prefix of an S3-compatible bucket: the
// operations a file store for published exports needs (a put that never overwrites, open,
// stat, delete, list, presigned downloads, and the clean-up of abandoned multipart uploads).
//
// It uses minio-go v7 rather than aws-sdk-go-v2: minio-go is written for S3-compatible
// servers as much as for AWS, it is one module with few dependencies where the AWS SDK is a
// dozen, and it sends no flexible-checksum headers unless asked, whereas aws-sdk-go-v2's
// default checksum settings (since service/s3 v1.73) break servers that do not know them
// (aws/aws-sdk-go-v2#3007).
package objstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// ErrExists is returned by PutIfAbsent when the key already holds an object; that object
// is left as it was.
var ErrExists = errors.New("object already exists")

// ErrNotFound is returned when the key holds no object.
var ErrNotFound = errors.New("object not found")

// ErrNoBucket is returned by Probe when the bucket does not exist; the error wrapping it
// reads "bucket NAME does not exist".
var ErrNoBucket = errors.New("does not exist")

// DefaultRegion is the region used when the URL names none. S3-compatible servers mostly
// accept any region, and naming one saves minio-go a GetBucketLocation request.
const DefaultRegion = "us-east-1"

// metaSHA256 is the user metadata (x-amz-meta-sha256) that carries an object's sha256, so
// that Stat can tell a reader the file's hash without reading the file.
const metaSHA256 = "Sha256"

// Config says which bucket and prefix to use and how to reach them.
type Config struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is put in front of every key; empty, or ending in "/".
	Prefix string
	// Endpoint is the server's URL (http://host:port or https://host); empty means AWS.
	// With an endpoint, buckets are addressed by path (http://host:port/bucket/key), which
	// every S3-compatible server understands and which needs no wildcard DNS.
	Endpoint string
	// Region signs the requests; default DefaultRegion.
	Region string
	// AccessKey and SecretKey are the credentials; when both are empty they come from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN).
	AccessKey, SecretKey string
	// Transport, when set, carries the requests (tests; a proxy); default: minio-go's.
	Transport http.RoundTripper
	// PartSize is the size of the parts in which an object larger than one part goes up;
	// 0: the default (16 MiB). Crash tests lower it so that small files go up in parts.
	// S3 refuses a part below MinPartSize (but the last) only when the upload completes,
	// so a smaller size fails every upload of several parts at its end: it serves only a
	// test whose process is killed between the parts.
	PartSize int64
	// AfterPart, when set, is called with n after part n of a multipart upload is
	// stored, before the upload completes (a crash test's fault point: a process killed
	// there leaves an incomplete upload for AbortStaleUploads).
	AfterPart func(n int)
}

// MinPartSize is S3's smallest part but the last, which S3-compatible servers such as
// versitygw enforce as well.
const MinPartSize = 5 << 20

// ParseURL reads s3://BUCKET/PREFIX?endpoint=http://host:port&region=REGION. The prefix
// and both parameters are optional; credentials are not part of the URL.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("file store URL: %w", err)
	}
	if u.Scheme != "s3" {
		return Config{}, fmt.Errorf("file store URL %q: the scheme must be s3://", raw)
	}
	if u.User != nil {
		// Keys in a URL end up in logs and process lists.
		return Config{}, fmt.Errorf("file store URL: put credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, not in the URL")
	}
	cfg := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return Config{}, fmt.Errorf("file store URL %q: bucket: %w", raw, err)
	}
	if cfg.Prefix != "" {
		cfg.Prefix += "/"
	}
	q := u.Query()
	for name, vals := range q {
		switch name {
		case "endpoint", "region":
			if len(vals) != 1 {
				return Config{}, fmt.Errorf("file store URL: %s given %d times", name, len(vals))
			}
		default:
			// A misspelt parameter would otherwise silently send the files to AWS.
			return Config{}, fmt.Errorf("file store URL: unknown parameter %q (known: endpoint, region)", name)
		}
	}
	cfg.Endpoint = q.Get("endpoint")
	cfg.Region = q.Get("region")
	if cfg.Endpoint != "" {
		if _, _, err := parseEndpoint(cfg.Endpoint); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// parseEndpoint splits http://host:port into what minio.New takes.
func parseEndpoint(endpoint string) (host string, secure bool, err error) {
	e, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("file store endpoint: %w", err)
	}
	if (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
		return "", false, fmt.Errorf("file store endpoint %q: want http://host:port or https://host", endpoint)
	}
	if strings.Trim(e.Path, "/") != "" || e.RawQuery != "" || e.User != nil {
		return "", false, fmt.Errorf("file store endpoint %q: want only a scheme, host and port", endpoint)
	}
	return e.Host, e.Scheme == "https", nil
}

// Store is one prefix of one bucket. It is safe for concurrent use.
type Store struct {
	client *minio.Client
	bucket string
	prefix string
	// partSize is the multipart part size (Config.PartSize); 0 means defaultPartSize.
	partSize int64
	// afterPart is Config.AfterPart, or nil.
	afterPart func(n int)
}

// maxSinglePut is S3's largest single PUT.
const maxSinglePut = 5 << 30

// Single returns the store with every upload of up to 5 GiB a single PUT, and no
// AfterPart: for objects that are not the files a multipart upload and its hook are for
// (an export's checkpointed pieces).
func (s *Store) Single() *Store {
	c := *s
	c.partSize, c.afterPart = maxSinglePut, nil
	return &c
}

// New returns a Store for cfg. It sends no request: a wrong endpoint or key shows on the
// first operation.
func New(cfg Config) (*Store, error) {
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("file store bucket: %w", err)
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("file store prefix %q must end in /", cfg.Prefix)
	}
	if cfg.PartSize < 0 {
		return nil, fmt.Errorf("file store part size %d: want 0 (the default) or more", cfg.PartSize)
	}
	var creds *credentials.Credentials
	switch {
	case cfg.AccessKey != "" && cfg.SecretKey != "":
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	case cfg.AccessKey != "" || cfg.SecretKey != "":
		return nil, errors.New("file store: give both the access key and the secret key")
	case os.Getenv("AWS_ACCESS_KEY_ID") != "" && os.Getenv("AWS_SECRET_ACCESS_KEY") != "":
		creds = credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	default:
		return nil, errors.New("file store: no credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	opts := &minio.Options{
		Creds:     creds,
		Region:    cmp.Or(cfg.Region, DefaultRegion),
		Transport: cfg.Transport,
	}
	host := "s3.amazonaws.com"
	opts.Secure = true
	if cfg.Endpoint != "" {
		var err error
		host, opts.Secure, err = parseEndpoint(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		opts.BucketLookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, opts)
	if err != nil {
		return nil, fmt.Errorf("file store client: %w", err)
	}
	return &Store{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix, partSize: cfg.PartSize, afterPart: cfg.AfterPart}, nil
}

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// name turns a key into the object's name in the bucket.
func (s *Store) name(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return "", fmt.Errorf("object key %q: want a relative name like exports/123/1.xlsx", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("object key %q: empty, . or .. segment", key)
		}
	}
	return s.prefix + key, nil
}

// Info describes a stored object.
type Info struct {
	// Key is the object's key, without the store's prefix.
	Key string
	// Size is in bytes.
	Size int64
	// SHA256 is the hex sha256 that PutIfAbsent recorded; List leaves it empty (a listing
	// does not carry user metadata).
	SHA256 string
	// Modified is the server's time of the write.
	Modified time.Time
}

// PutIfAbsent stores size bytes from r under key, unless the key already holds an object:
// then it returns ErrExists and the object stays as it was (the request that makes the
// object visible carries If-None-Match: *, so the server decides, atomically). sha256hex is
// the hash of the bytes; it is recorded with the object (Stat returns it), and a reader
// whose bytes do not match it is an error, after which the object is deleted so that
// nothing trusts it.
//
// An object larger than one part goes up in parts of partSize, read one at a time into
// memory; a failed upload is aborted, and one cut short by a crash is left for
// AbortStaleUploads.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64, sha256hex string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	want, err := hex.DecodeString(sha256hex)
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("put %s: sha256 %q is not 64 hex digits", key, sha256hex)
	}
	if size < 0 {
		return fmt.Errorf("put %s: size %d", key, size)
	}
	opts := minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{metaSHA256: strings.ToLower(sha256hex)},
		// minio-go's own multipart path sends If-None-Match on the request that starts
		// the upload but drops it from the one that completes it, where S3 checks it
		// (TestPutIfAbsentMultipart caught a second put overwriting the first), so this
		// package does multipart itself and minio-go only single PUTs.
		DisableMultipart: true,
	}
	opts.SetMatchETagExcept("*")
	h := sha256.New()
	body := io.TeeReader(r, h)
	var sent int64
	if size <= s.partBytes() {
		var info minio.UploadInfo
		info, err = s.client.PutObject(ctx, s.bucket, name, body, size, opts)
		sent = info.Size
	} else {
		sent, err = s.putParts(ctx, name, body, size, opts)
	}
	if err != nil {
		if isPreconditionFailed(err) {
			return fmt.Errorf("put %s: %w", key, ErrExists)
		}
		return fmt.Errorf("put %s: %w", key, err)
	}
	if sent != size || !bytes.Equal(h.Sum(nil), want) {
		// The bytes are stored, but not the ones the caller hashed (a file changed under
		// it); the key is this attempt's own, so deleting it races with no one.
		derr := s.client.RemoveObject(context.WithoutCancel(ctx), s.bucket, name, minio.RemoveObjectOptions{})
		return errors.Join(fmt.Errorf("put %s: the bytes sent (%d) do not match the size %d and sha256 given", key, sent, size), derr)
	}
	return nil
}

// defaultPartSize is the part size of large uploads: 10,000 parts (S3's limit) of 16 MiB
// reach 156 GiB, far beyond any export, and one part is the memory an upload holds.
const defaultPartSize = 16 << 20

func (s *Store) partBytes() int64 {
	if s.partSize > 0 {
		return s.partSize
	}
	return defaultPartSize
}

// putParts uploads size bytes from r as a multipart upload and completes it with opts's
// If-None-Match; on any failure it aborts the upload, so that no parts stay behind.
func (s *Store) putParts(ctx context.Context, name string, r io.Reader, size int64, opts minio.PutObjectOptions) (sent int64, err error) {
	core := minio.Core{Client: s.client}
	start := opts
	start.DisableMultipart = false
	id, err := core.NewMultipartUpload(ctx, s.bucket, name, start)
	if err != nil {
		return 0, fmt.Errorf("start upload: %w", err)
	}
	defer func() {
		if err != nil {
			if aerr := core.AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, name, id); aerr != nil {
				err = errors.Join(err, fmt.Errorf("abort upload %s: %w", id, aerr))
			}
		}
	}()
	buf := make([]byte, s.partBytes())
	var parts []minio.CompletePart
	for n := 1; sent < size; n++ {
		chunk := buf[:min(int64(len(buf)), size-sent)]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return sent, fmt.Errorf("read part %d: %w", n, err)
		}
		sum := sha256.Sum256(chunk)
		part, err := core.PutObjectPart(ctx, s.bucket, name, id, n, bytes.NewReader(chunk), int64(len(chunk)),
			minio.PutObjectPartOptions{Sha256Hex: hex.EncodeToString(sum[:])})
		if err != nil {
			return sent, fmt.Errorf("upload part %d: %w", n, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: n, ETag: part.ETag})
		sent += int64(len(chunk))
		if s.afterPart != nil {
			s.afterPart(n)
		}
	}
	if _, err := core.CompleteMultipartUpload(ctx, s.bucket, name, id, parts, opts); err != nil {
		return sent, err
	}
	return sent, nil
}

// Open returns the object's bytes and what Stat would say of it; the caller closes the
// reader. A missing key is ErrNotFound. The reader seeks: a read after a seek asks the
// server for the rest of the object from there, so an HTTP Range request is served
// without fetching what comes before it.
func (s *Store) Open(ctx context.Context, key string) (io.ReadSeekCloser, Info, error) {
	name, err := s.name(key)
	if err != nil {
		return nil, Info{}, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("open %s: %w", key, mapErr(err))
	}
	// GetObject sends nothing until the first read or Stat; Stat makes a missing key an
	// error here rather than at the caller's first Read.
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, Info{}, fmt.Errorf("open %s: %w", key, mapErr(err))
	}
	return obj, Info{Key: key, Size: st.Size, SHA256: st.UserMetadata[metaSHA256], Modified: st.LastModified}, nil
}

// Stat describes the object under key; a missing key is ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	name, err := s.name(key)
	if err != nil {
		return Info{}, err
	}
	st, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, mapErr(err))
	}
	return Info{Key: key, Size: st.Size, SHA256: st.UserMetadata[metaSHA256], Modified: st.LastModified}, nil
}

// Delete removes the object under key. Deleting a missing key is not an error (S3 answers
// 204 either way), so a janitor may repeat itself.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", key, mapErr(err))
	}
	return nil
}

// List returns the objects whose keys start with prefix (relative to the store's prefix;
// "" lists them all), in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]Info, error) {
	var out []Info
	for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, mapErr(obj.Err))
		}
		out = append(out, Info{Key: strings.TrimPrefix(obj.Key, s.prefix), Size: obj.Size, Modified: obj.LastModified})
	}
	return out, nil
}

// PresignGet returns a URL that downloads the object without credentials for ttl (at most
// 7 days, S3's limit). The server answers it with Content-Disposition: attachment and
// downloadName, so that a browser saves the file under that name rather than the key, and
// with contentType when it is given (objects are stored as application/octet-stream).
// Both are signed: a link whose name or type was changed is refused.
// Signing is local: the URL is made even for a missing key, which then answers 404.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error) {
	name, err := s.name(key)
	if err != nil {
		return "", err
	}
	params := url.Values{}
	if downloadName != "" {
		// FormatMediaType quotes the name and switches to RFC 2231's filename* for
		// names that are not plain ASCII.
		params.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": downloadName}))
	}
	if contentType != "" {
		params.Set("response-content-type", contentType)
	}
	u, err := s.client.PresignedGetObject(ctx, s.bucket, name, ttl, params)
	if err != nil {
		return "", fmt.Errorf("presign %s: %w", key, err)
	}
	return u.String(), nil
}

// AbortStaleUploads aborts the multipart uploads under the store's prefix that were
// started more than olderThan ago (by the server's clock against this node's, so leave a
// margin far above any upload's length and any clock skew), and returns how many it
// aborted. A process killed mid-upload leaves its parts behind, invisible to List and
// billed as storage, until this runs.
func (s *Store) AbortStaleUploads(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	core := minio.Core{Client: s.client}
	n := 0
	for up := range s.client.ListIncompleteUploads(ctx, s.bucket, s.prefix, true) {
		if up.Err != nil {
			return n, fmt.Errorf("list incomplete uploads: %w", up.Err)
		}
		if up.Initiated.After(cutoff) {
			continue
		}
		// By upload id, not by key: a fresh upload to the same key must survive.
		if err := core.AbortMultipartUpload(ctx, s.bucket, up.Key, up.UploadID); err != nil && !isNoSuchUpload(err) {
			return n, fmt.Errorf("abort upload %s of %s: %w", up.UploadID, up.Key, err)
		}
		n++
	}
	return n, nil
}

// Probe checks that the bucket takes a write under the prefix: it stores a small object
// under key (overwriting one left there) and deletes it. A missing bucket is ErrNoBucket,
// naming the bucket; anything else is the server's error, which Transient classifies.
// The caller bounds its time with ctx: the client retries a request that failed on the
// network for some seconds.
func (s *Store) Probe(ctx context.Context, key string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	body := []byte("sheetq write probe\n")
	// A plain PUT: the probe's key is the caller's own, and a leftover from a process
	// killed between the write and the delete must not fail the next probe.
	for try := 1; ; try++ {
		_, err := s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(body), int64(len(body)),
			minio.PutObjectOptions{ContentType: "text/plain", DisableMultipart: true})
		if err == nil {
			break
		}
		// Nodes that start together probe at once, under keys side by side. A server
		// that keeps objects as files (versitygw's posix backend) removes a folder when
		// another probe deletes its last object, and refuses a PUT into it at that
		// moment; the next PUT makes the folder again. A refusal that is the bucket's or
		// the keys' (missing, denied) does not pass, and is said at once.
		if try == probeTries || ctx.Err() != nil || !probeRace(err) {
			return s.probeErr("cannot write", err)
		}
	}
	if err := s.client.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return s.probeErr("wrote "+key+" but cannot delete it", err)
	}
	return nil
}

// probeTries is how many PUTs a Probe makes before it says the bucket cannot be written.
const probeTries = 3

// probeRace reports whether a probe's failed PUT may be a race with another probe's
// DELETE: the server answered with an error that is not about the bucket or the
// credentials.
func probeRace(err error) bool {
	switch minio.ToErrorResponse(err).Code {
	case "", minio.NoSuchBucket, "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return false
	}
	return true
}

func (s *Store) probeErr(what string, err error) error {
	if minio.ToErrorResponse(err).Code == minio.NoSuchBucket {
		return fmt.Errorf("bucket %q %w", s.bucket, ErrNoBucket)
	}
	return fmt.Errorf("bucket %q: %s: %w", s.bucket, what, err)
}

// Transient reports whether err, from an operation of this package, is one that may pass
// on its own, so that the same request is worth sending again later: the server could
// not be reached or dropped the connection (refused, reset, a timeout), or it answered
// with a server error (5xx), a throttle (429, SlowDown) or a request timeout. A refusal
// (403, a missing bucket, a precondition), a bad certificate or a local error is not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoBucket) {
		return false
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "RequestTimeout", "RequestError", "InternalError", "ServiceUnavailable", "SlowDown", "SlowDownWrite",
			"Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
			return true
		}
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests
	}
	// What the HTTP client says when no answer came back: the transport failed.
	var cert x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	if errors.As(err, &cert) || errors.As(err, &host) || errors.As(err, &inv) {
		return false
	}
	var uerr *url.Error
	if errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client") {
		return false // an https:// endpoint that serves http: it will not change
	}
	// A dial, read or write on the network failed, or timed out. Not any error with a
	// Timeout method: a local file's syscall.Errno has one too.
	var oerr *net.OpError
	var nerr net.Error
	return uerr != nil || errors.As(err, &oerr) || (errors.As(err, &nerr) && nerr.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// mapErr turns the server's "no such key" into ErrNotFound, keeping the original text.
func mapErr(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	}
	return err
}

func isPreconditionFailed(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == minio.PreconditionFailed || resp.StatusCode == http.StatusPreconditionFailed
}

func isNoSuchUpload(err error) bool {
	return minio.ToErrorResponse(err).Code == minio.NoSuchUpload
}
