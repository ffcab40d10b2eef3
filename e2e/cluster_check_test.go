//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/apiv1"
	"sheetq/jobs"
	"sheetq/store"
)

// The cluster test's checker: what the client saw accepted, against what the shared
// PostgreSQL database, the bucket and an SSE subscriber hold once every node is stopped.

// clusterCounts is what the checker found. Every field but jobs, succeeded, objects,
// multipartObjects and sseEvents must be 0.
type clusterCounts struct {
	jobs, succeeded, objects, sseEvents int
	multipartObjects                    int // SUCCEEDED jobs' objects made by a multipart upload
	recovered, fromObject               int // attempts taken back; jobs completed from their object
	lost, duplicated, unexpected        int
	notFinal, badObjects                int
	orphanObjects, openUploads          int
	sseMissing, sseDuplicated           int
	sseOutOfOrder, sseSnapshots         int
}

func (c clusterCounts) String() string {
	return fmt.Sprintf("jobs=%d succeeded=%d recovered=%d completed_from_object=%d objects=%d multipart_objects=%d lost=%d duplicated=%d unexpected=%d not_final=%d bad_objects=%d orphan_objects=%d open_uploads=%d sse_events=%d sse_missing=%d sse_duplicated=%d sse_out_of_order=%d sse_snapshots=%d",
		c.jobs, c.succeeded, c.recovered, c.fromObject, c.objects, c.multipartObjects, c.lost, c.duplicated, c.unexpected, c.notFinal, c.badObjects,
		c.orphanObjects, c.openUploads, c.sseEvents, c.sseMissing, c.sseDuplicated, c.sseOutOfOrder, c.sseSnapshots)
}

// clusterJob is one job row as the checker reads it.
type clusterJob struct {
	id, status, key, name, sha string
	attempt                    int
	size                       int64
}

// readJobs reads every export job of the schema.
func readJobs(t *testing.T, db *clusterDB) map[string]clusterJob {
	t.Helper()
	rows, err := db.query(context.Background(), `SELECT id, status, COALESCE(idempotency_key, ''),
		COALESCE(file_name, ''), COALESCE(file_sha256, ''), attempt, COALESCE(file_size, 0)
		FROM jobs WHERE kind = 'export'`)
	if err != nil {
		t.Fatalf("read jobs: %v", err)
	}
	byID := map[string]clusterJob{}
	for rows.Next() {
		var j clusterJob
		if err := rows.Scan(&j.id, &j.status, &j.key, &j.name, &j.sha, &j.attempt, &j.size); err != nil {
			t.Fatal(err)
		}
		j.key = strings.TrimPrefix(j.key, store.ClientKey("")) // the key the client sent
		byID[j.id] = j
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return byID
}

// objectKey is the bucket key of the job's file: the row records the file store's key
// (jobs.ObjectKey, exports/<id>/<attempt>.xlsx), below the --files prefix.
func objectKey(prefix string, j clusterJob) string { return prefix + "/" + j.name }

// checkCluster checks the database, the bucket under prefix, and what the subscriber
// received, against the requests the client saw accepted (key -> job id); it reports
// every violation with t.Errorf and returns the counts.
func checkCluster(t *testing.T, db *clusterDB, s3 *s3Server, bucket, prefix string, accepted map[string]string, sub *sseSubscriber) clusterCounts {
	t.Helper()
	ctx := context.Background()
	var c clusterCounts
	byID := readJobs(t, db)
	c.jobs = len(byID)

	// Lost: a 202 without its row. Duplicated: one key, several rows. Unexpected: a row
	// no client was told about.
	byKey := map[string][]string{}
	for id, j := range byID {
		byKey[j.key] = append(byKey[j.key], id)
	}
	wanted := map[string]bool{}
	for key, id := range accepted {
		wanted[id] = true
		if j, ok := byID[id]; !ok || j.key != key {
			c.lost++
			t.Errorf("lost: key %s was accepted as job %s, which the database does not hold", key, id)
		}
	}
	for key, ids := range byKey {
		if len(ids) > 1 {
			c.duplicated += len(ids) - 1
			t.Errorf("duplicated: key %q has %d jobs %v", key, len(ids), ids)
		}
	}
	for id, j := range byID {
		if !wanted[id] {
			c.unexpected++
			t.Errorf("unexpected: job %s (key %q, %s) was never acknowledged to a client", id, j.key, j.status)
		}
	}

	// Exactly one success event per SUCCEEDED job, and no attempt claimed twice.
	type evCount struct{ success, doubleStarts int }
	evs := map[string]*evCount{}
	rows, err := db.query(ctx, `SELECT job_id, type, attempt, COUNT(*) - `+requeuedStarts+` FROM job_events e
		WHERE type IN ('succeeded', 'completed_from_file', 'started', 'recovered') GROUP BY job_id, type, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, typ string
		var attempt, n int
		if err := rows.Scan(&id, &typ, &attempt, &n); err != nil {
			t.Fatal(err)
		}
		e := evs[id]
		if e == nil {
			e = &evCount{}
			evs[id] = e
		}
		switch {
		case typ == "recovered":
			c.recovered += n
		case typ != "started":
			e.success += n
			if typ == "completed_from_file" {
				c.fromObject += n
			}
		case n > 1:
			e.doubleStarts++ // two claims of one attempt: the fencing token was not unique
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// Each SUCCEEDED job's object has the size and sha256 its row records; every object
	// below the prefix is one of those, and no multipart upload is left open.
	s3c := s3.client()
	referenced := map[string]bool{}
	for id, j := range byID {
		e := evs[id]
		if e == nil {
			e = &evCount{}
		}
		if j.status != "SUCCEEDED" {
			c.notFinal++
			t.Errorf("job %s ended %s, want SUCCEEDED", id, j.status)
			continue
		}
		c.succeeded++
		if e.success != 1 || e.doubleStarts > 0 {
			c.duplicated++
			t.Errorf("job %s has %d success events and %d doubly claimed attempts, want 1 and 0", id, e.success, e.doubleStarts)
		}
		key := objectKey(prefix, j)
		referenced[key] = true
		if id2, attempt, ok := jobs.ParseObjectKey(j.name); !ok || id2 != id || attempt < 1 || attempt > j.attempt {
			c.badObjects++
			t.Errorf("job %s (attempt %d) records file %q, not one of its attempts' keys", id, j.attempt, j.name)
		}
		size, sum, etag, err := objectDigest(ctx, s3c, bucket, key)
		switch {
		case err != nil:
			c.badObjects++
			t.Errorf("job %s SUCCEEDED but its object %s cannot be read: %v", id, key, err)
		case size != j.size || sum != j.sha:
			c.badObjects++
			t.Errorf("job %s: object %s has %d bytes sha256 %s, the row records %d bytes %s", id, key, size, sum, j.size, j.sha)
		case multipartETag(etag):
			c.multipartObjects++
		}
	}
	for obj := range s3c.ListObjectsIter(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list the bucket: %v", obj.Err)
		}
		c.objects++
		if !referenced[obj.Key] {
			c.orphanObjects++
			t.Errorf("orphan object %s (%d bytes): no SUCCEEDED job references it", obj.Key, obj.Size)
		}
	}
	for up := range s3c.ListIncompleteUploads(ctx, bucket, prefix+"/", true) {
		if up.Err != nil {
			t.Fatalf("list incomplete uploads: %v", up.Err)
		}
		c.openUploads++
		t.Errorf("multipart upload %s of %s (started %s) is still open", up.UploadID, up.Key, up.Initiated)
	}

	if sub != nil {
		checkSubscriber(t, db, sub, &c)
	}
	return c
}

// objectDigest downloads the object and returns its size, sha256 and ETag.
func objectDigest(ctx context.Context, c *minio.Client, bucket, key string) (size int64, sum, etag string, err error) {
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, "", "", err
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		return 0, "", "", err
	}
	st, err := obj.Stat() // the answer to the GET already read: no second request
	if err != nil {
		return 0, "", "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), st.ETag, nil
}

// multipartETag reports whether an ETag is a multipart upload's: S3, and versitygw, make
// it the MD5 of the parts' MD5s followed by -<parts>, where a single PUT's is the MD5 of
// the bytes.
func multipartETag(etag string) bool {
	_, parts, ok := strings.Cut(strings.Trim(etag, `"`), "-")
	n, err := strconv.Atoi(parts)
	return ok && err == nil && n >= 1
}

// logEvent is one row of job_events in the order a commit-safe tailer delivers them.
type logEvent struct {
	id       int64
	job, typ string
}

// eventLog reads the export jobs' events in the commit-safe cursor's order
// (clusterDB.eventOrder).
func eventLog(t *testing.T, db *clusterDB) []logEvent {
	t.Helper()
	rows, err := db.query(context.Background(), `SELECT e.id, e.job_id, e.type FROM job_events e
		JOIN jobs j ON j.id = e.job_id WHERE j.kind = 'export' ORDER BY `+db.eventOrder())
	if err != nil {
		t.Fatalf("read job_events: %v", err)
	}
	var out []logEvent
	for rows.Next() {
		var e logEvent
		if err := rows.Scan(&e.id, &e.job, &e.typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSubscriber wants the subscriber to have received every event of the log once, in
// the log's order.
func checkSubscriber(t *testing.T, db *clusterDB, sub *sseSubscriber, c *clusterCounts) {
	t.Helper()
	all := eventLog(t, db)
	got, snapshots := sub.received()
	c.sseEvents, c.sseSnapshots = len(got), snapshots
	if snapshots > 0 {
		t.Errorf("the subscriber got %d snapshots: a resume did not find its Last-Event-ID", snapshots)
	}
	pos := make(map[int64]int, len(all)) // event id -> its place in the log
	for i, e := range all {
		pos[e.id] = i
	}
	seen := map[int64]bool{}
	last := -1
	for _, g := range got {
		if seen[g.id] {
			c.sseDuplicated++
			t.Errorf("SSE: event %d (%s of job %s) received twice", g.id, g.typ, g.job)
			continue
		}
		seen[g.id] = true
		p, ok := pos[g.id]
		switch {
		case !ok:
			c.sseDuplicated++ // an event the log does not hold is as wrong as a second copy
			t.Errorf("SSE: event %d (%s of job %s) is not in the log", g.id, g.typ, g.job)
			continue
		case p < last:
			c.sseOutOfOrder++
			t.Errorf("SSE: event %d (%s of job %s) came after event %d, which the log has later", g.id, g.typ, g.job, all[last].id)
		}
		last = max(last, p)
	}
	for _, e := range all {
		if !seen[e.id] {
			c.sseMissing++
			if c.sseMissing <= 10 {
				t.Errorf("SSE: event %d (%s of job %s) never arrived", e.id, e.typ, e.job)
			}
		}
	}
}

// sseSubscriber follows GET /api/v1/events on one node, reconnecting with the last id
// it received (Last-Event-ID) whenever the stream breaks, to whatever address the node
// has then (a restarted node listens on a new port).
type sseSubscriber struct {
	mu         sync.Mutex
	got        []logEvent
	ids        map[int64]bool
	snapshots  int
	connects   int
	lastCursor string
	done       chan struct{}
}

// state reads the subscriber under its lock.
func (s *sseSubscriber) state(f func(*sseSubscriber) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(s)
}

// subscribe starts following; urlOf gives the node's current address ("" while it is
// down). It stops when ctx ends.
func subscribe(ctx context.Context, urlOf func() string) *sseSubscriber {
	s := &sseSubscriber{ids: map[int64]bool{}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			if u := urlOf(); u != "" {
				_ = s.follow(ctx, u)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // a backoff between reconnections
			}
		}
	}()
	return s
}

// follow reads one stream until it breaks.
func (s *sseSubscriber) follow(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events", nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.lastCursor != "" {
		req.Header.Set("Last-Event-ID", s.lastCursor)
	}
	s.mu.Unlock()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/v1/events: %s", res.Status)
	}
	s.mu.Lock()
	s.connects++
	s.mu.Unlock()
	var id, event, data string
	hasID := false
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err // a partial message is dropped, as an EventSource drops it
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			s.dispatch(id, hasID, event, data)
			id, event, data, hasID = "", "", "", false
		case strings.HasPrefix(line, "id:"):
			id, hasID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " "), true
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimPrefix(strings.TrimPrefix(line, "event:"), " ")
		case strings.HasPrefix(line, "data:"):
			data = strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
}

// dispatch takes one complete message: an id line alone moves the resume point, a
// progress message (no id) is not part of the log, a snapshot means a resume failed.
func (s *sseSubscriber) dispatch(id string, hasID bool, event, data string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hasID {
		s.lastCursor = id
	}
	switch {
	case event == "snapshot":
		s.snapshots++
	case event == "" || !hasID:
	default:
		var d apiv1.StateEvent
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			// Kept, so that the checker reports it as an event not in the log.
			s.got = append(s.got, logEvent{id: -1, typ: event})
			return
		}
		s.got = append(s.got, logEvent{id: d.Event.ID, job: jobOf(d), typ: event})
		s.ids[d.Event.ID] = true
	}
}

func jobOf(d apiv1.StateEvent) string {
	if d.Job == nil {
		return ""
	}
	return d.Job.ID
}

// distinct is how many different events arrived.
func (s *sseSubscriber) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func (s *sseSubscriber) received() ([]logEvent, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logEvent(nil), s.got...), s.snapshots
}
