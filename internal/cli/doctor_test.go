//go:build !windows

package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// doctorDir is a data directory with n SUCCEEDED exports whose files are published as
// recorded; it returns the directory and the exports' ids.
func doctorDir(t *testing.T, n int) (datadir.Dir, []string) {
	t.Helper()
	ctx := context.Background()
	dir := datadir.Dir{Root: t.TempDir()}
	for _, d := range []string{dir.Exports(), dir.Tmp()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	st, err := sqlite.Open(ctx, dir.DB(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []string
	for i := range n {
		j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: json.RawMessage(`{"report":"demo"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Claim(ctx, "w", store.DefaultQueue); err != nil {
			t.Fatal(err)
		}
		body := []byte(strings.Repeat("cell ", 100+i))
		sum := sha256.Sum256(body)
		if err := os.WriteFile(jobs.FilePath(dir.Exports(), j.ID+export.FileExt), body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: j.ID + ".xlsx", Size: int64(len(body)),
			SHA256: hex.EncodeToString(sum[:]), Rows: 1}, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return dir, ids
}

// checks returns the check and job of each open problem, sorted.
func checks(rep doctorReport) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.Check+" "+p.Job)
	}
	slices.Sort(out)
	return out
}

// doctor reports what the server refuses to serve: links and special files in exports/
// and tmp/ (and those directories being links), a published file whose size differs
// from the record, and with --deep one whose sha256 differs at the same size.
func TestDoctorFindsLinksAndChangedFiles(t *testing.T) {
	ctx := context.Background()
	dir, ids := doctorDir(t, 5)
	linked, fifo, shorter, flipped, fine := ids[0], ids[1], ids[2], ids[3], ids[4]
	opts := doctorOptions{MinFree: 0}
	rep, err := diagnose(ctx, dir, opts)
	if err != nil || !rep.Healthy {
		t.Fatalf("fresh directory: %v, %+v", err, rep.Problems)
	}

	outside := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(outside, []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := func(id string) string { return jobs.FilePath(dir.Exports(), id+export.FileExt) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(path(linked)))
	must(os.Symlink(outside, path(linked)))
	must(os.Remove(path(fifo)))
	must(syscall.Mkfifo(path(fifo), 0o644))
	body, err := os.ReadFile(path(shorter))
	must(err)
	must(os.WriteFile(path(shorter), body[:len(body)-1], 0o644))
	body, err = os.ReadFile(path(flipped))
	must(err)
	body[len(body)/2] ^= 0x01 // same size, one bit
	must(os.WriteFile(path(flipped), body, 0o644))
	partLink := filepath.Join(dir.Tmp(), jobs.PartName(fine, 2))
	must(os.Symlink(outside, partLink))

	rep, err = diagnose(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"file_size " + shorter, "link " + fine, "link " + linked, "not_regular " + fifo}
	slices.Sort(want)
	if got := checks(rep); !slices.Equal(got, want) || rep.Healthy {
		t.Fatalf("problems %q, want %q\n%+v", got, want, rep.Problems)
	}
	for _, p := range rep.Problems {
		if p.Job == linked && !strings.Contains(p.Message, outside) {
			t.Errorf("the link's line does not name its target %s: %s", outside, p.Message)
		}
	}

	opts.Deep = true
	rep, err = diagnose(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, "file_sha256 "+flipped)
	slices.Sort(want)
	if got := checks(rep); !slices.Equal(got, want) {
		t.Fatalf("--deep: problems %q, want %q\n%+v", got, want, rep.Problems)
	}

	// exports/ itself a link: reported, as the server refuses to serve through it.
	moved := dir.Exports() + ".real"
	must(os.Rename(dir.Exports(), moved))
	must(os.Symlink(moved, dir.Exports()))
	rep, err = diagnose(ctx, dir, doctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Problems, func(p doctorProblem) bool { return p.Check == "link" && p.Path == dir.Exports() }) {
		t.Fatalf("exports/ is a link, not reported: %+v", rep.Problems)
	}
}

// TestDoctorBadFlags: usage mistakes exit 2 with one line on stderr, before any check.
func TestDoctorBadFlags(t *testing.T) {
	dir, _ := doctorDir(t, 0) // healthy: a mistake must not read as "ok"
	for _, args := range [][]string{
		{"extra"},
		{"--min-free-mb", "-1"}, // not 0: that would turn the disk space check off
		{"--min-free-mb", "-512"},
		{"--min-free-mb", "17592186044417"}, // 2^44+1 MiB: its bytes would overflow
	} {
		_, stderr, code := runCLI(t, append([]string{"doctor", "--data", dir.Root}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("doctor %v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
}
