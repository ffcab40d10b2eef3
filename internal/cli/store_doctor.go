package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"sheetq/app"
	"sheetq/internal/client"
	"sheetq/internal/objstore"
	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/pg"
)

// diagnoseServer is doctor's check of a PostgreSQL or MySQL/MariaDB job store (the
// driver's Diagnose: the connection, the schema version and a write probe) in place of
// the SQLite file's. ok is false when the jobs could not be read, so that the file
// checks, which would find every file an orphan, are skipped.
func diagnoseServer(ctx context.Context, dsn string, add func(doctorProblem)) (files []store.JobFile, ok bool) {
	where := app.RedactURL(dsn)
	diagnose := pg.Diagnose
	if app.IsMySQL(dsn) {
		diagnose = mysql.Diagnose
	}
	h, err := diagnose(ctx, dsn)
	if err != nil {
		add(doctorProblem{Check: "database", Path: where, Message: client.OneLine(fmt.Sprintf("%s: %v", where, err))})
		return nil, false
	}
	for _, p := range h.Problems {
		add(doctorProblem{Check: "database", Path: where, Message: where + ": " + p})
	}
	return h.Files, h.Schema == h.Want
}

// probeKey is where doctor's write probe goes in the bucket: beside exports/, so that no
// job's file and no listing of published files can meet it.
const probeKey = "doctor/probe-"

// checkBucket is doctor's check of an S3 file store in place of the exports folder's:
// the bucket answers, takes a write and a delete (a small object under a key of its
// own), and holds each SUCCEEDED job's file under its recorded key with the recorded
// size (and, when deep, the sha256 recorded with the object); an object under
// exports/ that no job owns is an orphan. It returns how many objects are published.
func checkBucket(ctx context.Context, cfg objstore.Config, url string, jobFiles []store.JobFile, deep bool, add func(doctorProblem)) int {
	where := app.RedactURL(url)
	fail := func(err error) int {
		add(doctorProblem{Check: "bucket", Path: where, Message: client.OneLine(fmt.Sprintf("%s: %v", where, err))})
		return 0
	}
	b, err := objstore.New(cfg)
	if err != nil {
		return fail(err)
	}
	body := []byte("sheetq doctor\n")
	sum := sha256.Sum256(body)
	key := probeKey + strings.ToLower(rand.Text())
	if err := b.PutIfAbsent(ctx, key, bytes.NewReader(body), int64(len(body)), hex.EncodeToString(sum[:])); err != nil {
		return fail(fmt.Errorf("cannot write: %w", err))
	}
	if err := b.Delete(ctx, key); err != nil {
		return fail(fmt.Errorf("wrote %s but cannot delete it: %w", key, err))
	}
	objects, err := b.List(ctx, "exports/")
	if err != nil {
		return fail(fmt.Errorf("cannot list: %w", err))
	}
	byKey := make(map[string]objstore.Info, len(objects))
	for _, o := range objects {
		byKey[o.Key] = o
	}
	owner := map[string]store.JobFile{}
	for _, j := range jobFiles {
		if j.Status != store.StatusSucceeded || j.FileName == "" {
			continue
		}
		owner[j.FileName] = j
		o, found := byKey[j.FileName]
		switch {
		case !found:
			add(doctorProblem{Check: "missing_file", Path: j.FileName, Job: j.ID,
				Message: fmt.Sprintf("export %s is SUCCEEDED but its object %s is not in %s", j.ID, j.FileName, where)})
		case o.Size != j.FileSize:
			add(doctorProblem{Check: "file_size", Path: j.FileName, Job: j.ID,
				Message: fmt.Sprintf("%s: %d bytes, but export %s recorded %d", j.FileName, o.Size, j.ID, j.FileSize)})
		case deep:
			info, err := b.Stat(ctx, j.FileName)
			if err == nil && !strings.EqualFold(info.SHA256, j.FileSHA256) {
				err = fmt.Errorf("sha256 %q, but export %s recorded %s", info.SHA256, j.ID, j.FileSHA256)
			}
			if err != nil {
				add(doctorProblem{Check: "file_sha256", Path: j.FileName, Job: j.ID, Message: fmt.Sprintf("%s: %v", j.FileName, err)})
			}
		}
	}
	running := map[string]int{}
	for _, j := range jobFiles {
		if j.Status == store.StatusProcessing {
			running[j.ID] = j.Attempt
		}
	}
	for _, o := range objects {
		if _, ok := owner[o.Key]; ok {
			continue
		}
		// A running attempt uploads before its SUCCEEDED commit records the key.
		if id, attempt, ok := jobs.ParseObjectKey(o.Key); ok && running[id] == attempt {
			continue
		}
		add(doctorProblem{Check: "orphan_file", Path: o.Key, Message: fmt.Sprintf("%s: object in %s that no finished export owns (the janitor removes it)", o.Key, where)})
	}
	return len(objects)
}
