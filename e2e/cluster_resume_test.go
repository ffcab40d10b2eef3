//go:build !windows

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/client"
	"sheetq/store"
)

// Two nodes share one PostgreSQL schema and one bucket. The node running a long demo
// export is killed with SIGKILL at about half of it; the other node, whose data
// directory never held the export's files, recovers the job and resumes it from the
// rows the checkpoints put in the bucket, and the file is an uninterrupted export's.
// When the job ends, its pieces are gone from the bucket.
func TestClusterResumesOnAnotherNode(t *testing.T) {
	const rows, seconds = 60_000, 6
	dsn, storeURL := postgresBackend.fresh(t)
	bucket, prefix := randomName("sheetq-resume-"), "q"
	s3 := startS3(t, bucket)
	c := &cluster{t: t, backend: postgresBackend, dsn: dsn, storeURL: storeURL, files: s3.filesURL(bucket, prefix), bucket: bucket, prefix: prefix, s3: s3,
		db: openClusterDB(t, postgresBackend, dsn)}
	for i := range 2 {
		c.nodes = append(c.nodes, &clusterNode{name: fmt.Sprintf("n%d", i+1), data: t.TempDir()})
	}
	for _, n := range c.nodes {
		if c.launch(n, nil); n.url() == "" {
			t.Fatalf("%s did not start\n%s", n.name, n.cur.Load().log())
		}
	}
	api := func(n *clusterNode) *client.Client { return client.New(n.url(), "", nil) }
	j, _, err := api(c.nodes[0]).CreateExport(t.Context(), client.ExportRequest{Report: "demo",
		Params: map[string]string{"rows": fmt.Sprint(rows), "seconds": fmt.Sprint(seconds)}}, randomName("key-"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var victim, survivor *clusterNode
	waitUntil(t, time.Minute, func() bool {
		got, _, err := api(c.nodes[0]).GetJob(t.Context(), j.ID)
		if err != nil || got.Status != "PROCESSING" || got.Progress.Rows < rows/2 {
			return false
		}
		for i, n := range c.nodes {
			if c.running(n) == 1 {
				victim, survivor = n, c.nodes[1-i]
			}
		}
		return victim != nil
	})
	stamped := c.query(`SELECT progress_rows FROM jobs WHERE id = $1`, j.ID)
	killed := time.Now()
	victim.cur.Load().kill(t)
	t.Logf("killed %s at %d rows (last heartbeat); %s takes over", victim.name, stamped, survivor.name)

	waitUntil(t, 2*time.Minute, func() bool {
		got, _, err := api(survivor).GetJob(t.Context(), j.ID)
		return err == nil && got.Status == "SUCCEEDED"
	})
	kept := c.query(`SELECT COALESCE(MAX((data->>'rows')::bigint), -1) FROM job_events WHERE job_id = $1 AND type = $2`, j.ID, store.EventResumed)
	var at time.Time
	c.dbMu.Lock()
	err = c.db.queryRow(`SELECT at FROM job_events WHERE job_id = $1 AND type = $2`, j.ID, store.EventResumed).Scan(&at)
	c.dbMu.Unlock()
	if err != nil {
		t.Fatalf("no resumed event: %v", err)
	}
	perBeat := rows / seconds * int(clusterStaleAfter/10) / int(time.Second)
	// A heartbeat waits up to half an interval for the checkpoint it carries; one that
	// was not ready (pieces still uploading on a loaded machine: a CI run met it) goes
	// in the next, so the last checkpoint is at most two heartbeats behind the stamp.
	if kept <= 0 || kept > stamped || kept < stamped-2*perBeat {
		t.Fatalf("%s resumed with %d rows; the last heartbeat stamped %d (a heartbeat is about %d rows, two at most may be redone)", survivor.name, kept, stamped, perBeat)
	}
	t.Logf("%s resumed from row %d: %d rows written again; %s from the kill to the resume (stale-after %s)",
		survivor.name, kept+1, stamped-kept, at.Sub(killed).Round(time.Millisecond), clusterStaleAfter)
	if _, err := os.Stat(filepath.Join(survivor.data, "tmp", "resume", j.ID)); !os.IsNotExist(err) {
		t.Errorf("the survivor's resume folder is left: %v", err)
	}

	// The reference: the same rows, uninterrupted.
	ref, _, err := api(survivor).CreateExport(t.Context(), client.ExportRequest{Report: "demo",
		Params: map[string]string{"rows": fmt.Sprint(rows), "seconds": "0"}}, randomName("key-"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err = api(survivor).Wait(t.Context(), ref, nil)
	if err != nil || ref.Status != "SUCCEEDED" {
		t.Fatalf("reference export: %+v, %v", ref, err)
	}
	dir := t.TempDir()
	done, _, err := api(survivor).GetJob(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := api(survivor).Download(t.Context(), done, filepath.Join(dir, "resumed.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := api(survivor).Download(t.Context(), ref, filepath.Join(dir, "reference.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	sameSheets(t, got, want)

	for obj := range s3.client().ListObjectsIter(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix + "/resume/", Recursive: true}) {
		t.Errorf("piece left in the bucket after the job ended: %s (%v)", obj.Key, obj.Err)
	}
}
