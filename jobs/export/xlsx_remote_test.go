package export

import (
	"log/slog"
	"path/filepath"
	"testing"

	"sheetq/internal/objstore/objstoretest"
	"sheetq/jobs"
)

// pieces opens a fresh bucket of the test S3 server as the place for checkpointed rows.
func pieces(t *testing.T) *jobs.BucketPieces {
	t.Helper()
	env := objstoretest.Bucket(t)
	f, err := jobs.OpenFiles(env.URL("p/"), t.TempDir(), env.AccessKey, env.SecretKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return f.(*jobs.S3Files).Pieces()
}

// An export that crashes on one node continues on another, whose resume folder is
// empty, from the rows its checkpoints put in the bucket: twice, across a sheet's end,
// and the file equals an uninterrupted export's. When the job ends its pieces go.
func TestResumeOnAnotherNodeFromTheBucket(t *testing.T) {
	t.Parallel()
	remote := pieces(t)
	const rows, perSheet = 9000, 2500
	q := demoQuery(rows)
	_, want := exportWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: perSheet})
	var cp []byte
	var kept int64
	node := 0
	run := func(crash int64) ([]byte, int64, error) {
		node++ // a node of its own each time: its resume folder is empty
		r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 700, attempt: node - 1}
		r.remote, r.prefix = remote, "job/"
		data, last, resumed, err := r.run(t, demoSource{}, q, cp, crash, perSheet)
		if cp != nil && resumed != kept {
			t.Fatalf("node %d resumed with %d rows, want the checkpoint's %d", node, resumed, kept)
		}
		if last != nil {
			c := decodeCheckpoint(t, last)
			cp, kept = last, c.Rows
			if m := c.Sheets[len(c.Sheets)-1]; len(m.Pieces) == 0 || m.Pieces[len(m.Pieces)-1].To != m.Comp {
				t.Fatalf("checkpoint's last sheet %+v: not all in the bucket", m)
			}
		}
		return data, resumed, err
	}
	if _, _, err := run(2300); err == nil {
		t.Fatal("the export finished")
	}
	if _, _, err := run(4000); err == nil {
		t.Fatal("the export finished")
	}
	data, resumed, err := run(-1)
	if err != nil {
		t.Fatal(err)
	}
	if resumed <= 2500 {
		t.Fatalf("the last node resumed with %d rows, want past the first sheet", resumed)
	}
	sameSheets(t, data, want, 4)
	keys, err := remote.List(t.Context(), "job/")
	if err != nil || len(keys) == 0 {
		t.Fatalf("pieces in the bucket: %v, %v", keys, err)
	}
	// A piece is what its key says: a damaged or missing one makes the next node start
	// over rather than continue from wrong bytes.
	k := New(Config{Remote: remote})
	n, err := k.RemoveResumeFiles(func(id string) bool { return id != "job" })
	if err != nil || n != 1 {
		t.Fatalf("RemoveResumeFiles = %d, %v; want the one job", n, err)
	}
	if keys, err := remote.List(t.Context(), ""); err != nil || len(keys) != 0 {
		t.Fatalf("pieces left: %v, %v", keys, err)
	}
}

// A checkpoint whose pieces are gone from the bucket, on a node without the files,
// starts over and still makes the whole file.
func TestResumeWithoutThePiecesStartsOver(t *testing.T) {
	t.Parallel()
	remote := pieces(t)
	const rows, perSheet = 5000, 4000
	q := demoQuery(rows)
	_, want := exportWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: perSheet})
	r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 1000}
	r.remote, r.prefix = remote, "job/"
	_, cp, _, _ := r.run(t, demoSource{}, q, nil, 4500, perSheet)
	if cp == nil {
		t.Fatal("no checkpoint")
	}
	keys, err := remote.List(t.Context(), "job/")
	if err != nil || len(keys) == 0 {
		t.Fatalf("pieces: %v, %v", keys, err)
	}
	if err := remote.Delete(t.Context(), keys[len(keys)-1]); err != nil {
		t.Fatal(err)
	}
	other := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 1000, attempt: 1}
	other.remote, other.prefix = remote, "job/"
	data, _, resumed, err := other.run(t, demoSource{}, q, cp, -1, perSheet)
	if err != nil {
		t.Fatal(err)
	}
	if resumed != -1 {
		t.Fatalf("resumed with %d rows from a bucket that lacks a piece", resumed)
	}
	sameSheets(t, data, want, 2)
}
