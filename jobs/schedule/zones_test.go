package schedule

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostOnlyZones are names a host's zone folder may hold that Go's embedded database does
// not: leap-second and POSIX variants, and the rules file some hosts ship.
var hostOnlyZones = []string{"right/UTC", "posix/Europe/Berlin", "right/Europe/Berlin", "posix/UTC", "posixrules"}

// utcTZif is a zone file as a host keeps one (TZif version 1): a single type, UTC.
func utcTZif() []byte {
	b := append([]byte("TZif"), make([]byte, 16)...) // magic, version 1, reserved
	// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} {
		b = binary.BigEndian.AppendUint32(b, n)
	}
	b = append(b, 0, 0, 0, 0, 0, 0) // the type: offset 0, not DST, abbreviation at 0
	return append(b, "UTC\x00"...)
}

// Names only the host knows are refused whatever the host has, so that a schedule every
// node accepts loads on every node (issue 36, 7e). The test runs itself again with
// ZONEINFO naming a folder that holds those names, as /usr/share/zoneinfo on many hosts
// does: the time package reads ZONEINFO once per process.
func TestLoadZoneRefusesHostOnlyZones(t *testing.T) {
	const child = "SHEETQ_TEST_HOST_ZONES"
	if os.Getenv(child) == "" {
		dir := t.TempDir()
		for _, name := range hostOnlyZones {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, utcTZif(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadZoneRefusesHostOnlyZones$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1", "ZONEINFO="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("with the zones in ZONEINFO: %v\n%s", err, out)
		}
	} else {
		// The host does have them here: the time package loads each.
		for _, name := range hostOnlyZones {
			if _, err := time.LoadLocation(name); err != nil {
				t.Fatalf("the fake host zone %s does not load, so this run proves nothing: %v", name, err)
			}
		}
	}
	for _, name := range append(hostOnlyZones, "Europe/berlin", "Mars/Olympus", "Local", "") {
		if loc, err := LoadZone(name); err == nil {
			t.Errorf("LoadZone(%q) = %v, want it refused", name, loc)
		}
	}
	for _, name := range hostOnlyZones {
		_, err := LoadZone(name)
		if want := `unknown time zone "` + name + `": use an IANA name such as Europe/Berlin`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadZone(%q): %v, want %q", name, err, want)
		}
	}
}

// Every name of the embedded list loads, UTC and Etc/UTC among them.
func TestEveryEmbeddedZoneLoads(t *testing.T) {
	t.Parallel()
	if !slices.IsSorted(embeddedZones) {
		t.Fatal("embeddedZones is not sorted: LoadZone's binary search would miss names")
	}
	for _, name := range []string{"UTC", "Etc/UTC", "Europe/Berlin", "America/New_York"} {
		if _, ok := slices.BinarySearch(embeddedZones, name); !ok {
			t.Errorf("%s is not in the list", name)
		}
	}
	for _, name := range embeddedZones {
		loc, err := LoadZone(name)
		if err != nil || loc.String() != name {
			t.Errorf("LoadZone(%q) = %v, %v", name, loc, err)
		}
	}
}

// The committed list is the zone database of the Go that builds it: a Go upgrade that
// changes the zone data fails here until `go generate ./jobs/schedule` is run. Skipped
// only where the toolchain ships no zoneinfo.zip.
func TestEmbeddedZonesMatchGOROOT(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("no go command to find GOROOT: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip")
	z, err := zip.OpenReader(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		if !f.FileInfo().IsDir() {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, embeddedZones) {
		var added, removed []string
		for _, n := range names {
			if !slices.Contains(embeddedZones, n) {
				added = append(added, n)
			}
		}
		for _, n := range embeddedZones {
			if !slices.Contains(names, n) {
				removed = append(removed, n)
			}
		}
		t.Fatalf("zones_gen.go is out of date with %s (new there: %v; gone: %v): run go generate ./jobs/schedule",
			path, added, removed)
	}
}
