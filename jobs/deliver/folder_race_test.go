package deliver

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFolderSymlinkSwapCannotEscape (issue 36, item 4): while a goroutine swaps the
// target folder between a real folder and a symbolic link to a folder outside the
// allowed root, hundreds of deliveries put no file outside the root and leave no
// temporary file anywhere; every file delivered inside is whole. Today's code checked
// the links first and then wrote by path, and the swap slipped in between.
func TestFolderSymlinkSwapCannotEscape(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	sub := filepath.Join(root, "monthly")
	parked := filepath.Join(root, "parked")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	h, _, a, body := folderFixture(t, root, sub, 4<<10)
	h.cfg.Logger = slog.New(slog.DiscardHandler) // hundreds of expected failures

	stop, stopped := make(chan struct{}), make(chan struct{})
	swaps := 0
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The real folder steps aside and a link out takes its name, then back.
			// Each step is one rename or link, so a delivery sees either, or nothing.
			for _, step := range []func() error{
				func() error { return os.Rename(sub, parked) },
				func() error { return os.Symlink(outside, sub) },
				func() error { return os.Remove(sub) },
				func() error { return os.Rename(parked, sub) },
			} {
				if err := step(); err != nil {
					t.Errorf("swap: %v", err)
					return
				}
			}
			swaps++
		}
	}()
	const deliveries = 400
	for i := range deliveries {
		a.DownloadName = fmt.Sprintf("orders-%03d.xlsx", i)
		_ = run(t, h, a, 1) // a delivery may fail (the folder missing, a link out); it must not escape
	}
	close(stop)
	<-stopped
	t.Logf("%d deliveries over %d swaps", deliveries, swaps)

	// One more delivery with the folder back in place must succeed: the handler still
	// works after the race, so the checks above are not vacuous.
	a.DownloadName = "orders-final.xlsx"
	if err := run(t, h, a, 1); err != nil {
		t.Fatalf("delivery after the swaps: %v", err)
	}

	var escaped, temps []string
	delivered := 0
	walk := func(dir string, inside bool) {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			switch {
			case !inside:
				escaped = append(escaped, p)
			case strings.HasSuffix(p, ".tmp"):
				temps = append(temps, p)
			default:
				delivered++
				if got, err := os.ReadFile(p); err != nil || string(got) != string(body) {
					t.Errorf("%s: %d bytes, %v; want the export's %d", p, len(got), err, len(body))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(root, true)
	walk(outside, false)
	if len(escaped) > 0 {
		t.Errorf("%d files written outside the allowed folder, such as %s", len(escaped), escaped[0])
	}
	if len(temps) > 0 {
		t.Errorf("%d temporary files left inside, such as %s", len(temps), temps[0])
	}
	if delivered == 0 {
		t.Error("no file was delivered")
	}
}

// TestFolderLinksThatStayInside: a folder reached through a link that stays inside the
// allowed folders (a relative one inside the root, or one into another allowed root)
// is delivered to, as before the writes went through a handle on the folder.
func TestFolderLinksThatStayInside(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	h, _, a, body := folderFixture(t, root, "", 100)
	h.cfg.Folders = []string{root, other}
	if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "relative")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(root, "other")); err != nil {
		t.Fatal(err)
	}
	for link, dst := range map[string]string{"relative": filepath.Join(root, "real"), "other": other} {
		a.Target.Path = filepath.Join(root, link)
		if err := run(t, h, a, 1); err != nil {
			t.Errorf("through %s: %v", link, err)
			continue
		}
		if got, err := os.ReadFile(filepath.Join(dst, a.DownloadName)); err != nil || string(got) != string(body) {
			t.Errorf("through %s: %d bytes in %s, %v", link, len(got), dst, err)
		}
	}
}
