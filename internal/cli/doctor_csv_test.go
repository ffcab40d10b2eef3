//go:build !windows

package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// doctor checks a csv export's file, exports/<id>.csv, as it checks an xlsx one's: a
// file of another size than recorded, and a .csv file of no export, are problems.
func TestDoctorChecksCSVFiles(t *testing.T) {
	ctx := context.Background()
	dir, _ := doctorDir(t, 1)
	st, err := sqlite.Open(ctx, dir.DB(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export",
		Args: json.RawMessage(`{"report":"demo","format":"csv"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, "w", store.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	name := (&export.Kind{}).FileName(j.ID, j.Args)
	body := []byte("id,name\r\n1,Ada\r\n")
	sum := sha256.Sum256(body)
	if err := os.WriteFile(jobs.FilePath(dir.Exports(), name), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: name, Size: int64(len(body)),
		SHA256: hex.EncodeToString(sum[:]), Rows: 1}, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	rep, err := diagnose(ctx, dir, doctorOptions{})
	if err != nil || !rep.Healthy || rep.Published != 2 {
		t.Fatalf("fresh directory: %v, %d published, %+v", err, rep.Published, rep.Problems)
	}
	if err := os.WriteFile(jobs.FilePath(dir.Exports(), name), body[:len(body)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs.FilePath(dir.Exports(), "stray.csv"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = diagnose(ctx, dir, doctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := checks(rep), []string{"file_size " + j.ID, "orphan_file stray"}; !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
}
