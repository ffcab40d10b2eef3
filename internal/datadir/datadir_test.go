package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLock(t *testing.T) {
	d := Dir{Root: filepath.Join(t.TempDir(), "nested", "data")}
	first, err := d.Lock()
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}

	// Before the owner is recorded, the refusal still says why.
	if _, err := d.Lock(); !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock without owner: %v, want ErrInUse", err)
	}

	const url = "http://127.0.0.1:4321"
	if err := first.SetOwner(url); err != nil {
		t.Fatalf("setOwner: %v", err)
	}
	second, err := d.Lock()
	if second != nil || !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock: %v, %v; want ErrInUse", second, err)
	}
	if pid := strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), url) {
		t.Errorf("error %q does not name pid %s and %s", err, pid, url)
	}
	if !strings.Contains(err.Error(), d.Root) {
		t.Errorf("error %q does not name the directory", err)
	}

	if err := first.Unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	third, err := d.Lock()
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	if err := third.Unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}

func TestLayout(t *testing.T) {
	d := Dir{Root: filepath.FromSlash("/srv/sheetq")}
	for got, want := range map[string]string{
		d.DB(): "/srv/sheetq/sheetq.db", d.Tmp(): "/srv/sheetq/tmp",
		d.Exports(): "/srv/sheetq/exports", d.Reports(): "/srv/sheetq/reports",
	} {
		if got != filepath.FromSlash(want) {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
