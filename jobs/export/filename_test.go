package export

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"sheetq/store"
)

// A report's "-- filename:" pattern names the download from the job's params, safe on
// every OS; without a pattern, or when nothing of it is left, the name is as before.
func TestDownloadNameFromPattern(t *testing.T) {
	day := time.Date(2025, 3, 4, 23, 30, 0, 0, time.UTC)
	// job is a job with these args, and the args as decoded from it (numbers as JSON's).
	job := func(pattern string, params map[string]any, ext string) (Args, store.Job) {
		t.Helper()
		args := Args{Report: "orders", Params: params}
		if pattern != "" {
			args.Spec = &Report{ID: "orders", Filename: pattern}
		}
		if ext == CSVExt {
			args.Format = FormatCSV
		}
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		var decoded Args
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		return decoded, store.Job{ID: "0123456789abcdef", Args: raw, CreatedAt: day, FinishedAt: day}
	}
	long := strings.Repeat("ä", 200)
	tests := []struct {
		name    string
		pattern string
		params  map[string]any
		ext     string
		want    string
	}{
		{"no pattern", "", map[string]any{"from": "2025-03-01"}, ".xlsx", "orders-2025-03-04-01234567.xlsx"},
		{"dates", "orders-{from}-{to}", map[string]any{"from": "2025-03-01", "to": "2025-04-01"}, ".xlsx", "orders-2025-03-01-2025-04-01.xlsx"},
		{"the extension is the format's", "orders-{from}", map[string]any{"from": "2025-03-01"}, ".csv", "orders-2025-03-01.csv"},
		{"numbers and bools", "revenue {year} {rate} {all}", map[string]any{"year": int64(2025), "rate": 0.25, "all": true}, ".xlsx", "revenue 2025 0.25 true.xlsx"},
		{"a datetime's colons", "at {t}", map[string]any{"t": "2025-03-04T05:06:07Z"}, ".xlsx", "at 2025-03-04T05-06-07Z.xlsx"},
		{"every unsafe character", "r {v}", map[string]any{"v": `a/b\c:d*e?f"g<h>i|j`}, ".xlsx", "r a-b-c-d-e-f-g-h-i-j.xlsx"},
		{"control and invisible characters", "{v}", map[string]any{"v": "a\x00b\tc\u202egpj.exe\u200b"}, ".xlsx", "a-b-c-gpj.exe-.xlsx"},
		{"dots and spaces at the ends", "{v}", map[string]any{"v": " ..hidden. . "}, ".xlsx", "hidden.xlsx"},
		{"a Windows device name", "{v}", map[string]any{"v": "con"}, ".xlsx", "con_.xlsx"},
		{"a device name with a dot", "{v}", map[string]any{"v": "COM1.report"}, ".xlsx", "COM1_.report.xlsx"},
		{"a device name with a space", "{v}", map[string]any{"v": "NUL .x"}, ".xlsx", "NUL_.x.xlsx"},
		{"not a device name", "{v}", map[string]any{"v": "CONSOLE"}, ".xlsx", "CONSOLE.xlsx"},
		{"a long value is cut on a character", "x{v}", map[string]any{"v": long}, ".xlsx", "x" + strings.Repeat("ä", 74) + ".xlsx"},
		{"nothing left: the default", "{v}", map[string]any{"v": " . "}, ".xlsx", "orders-2025-03-04-01234567.xlsx"},
		{"a param gone since: empty", "orders-{from}-{gone}", map[string]any{"from": "2025"}, ".xlsx", "orders-2025-.xlsx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DownloadName(job(tt.pattern, tt.params, tt.ext))
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			checkSafeName(t, strings.TrimSuffix(got, tt.ext))
		})
	}
}

// checkSafeName fails unless name is a file name every OS accepts as it is.
func checkSafeName(t *testing.T, name string) {
	t.Helper()
	stem, _, _ := strings.Cut(name, ".")
	switch {
	case name == "", !utf8.ValidString(name), len(name) > maxDownloadBase:
		t.Errorf("name %q is empty, not UTF-8 or too long", name)
	case strings.ContainsAny(name, `/\:*?"<>|`), strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }):
		t.Errorf("name %q holds a character some OS refuses or hides", name)
	case strings.TrimRight(name, ". ") != name, strings.TrimLeft(name, ". ") != name:
		t.Errorf("name %q starts or ends with a dot or a space", name)
	case windowsDevice(stem):
		t.Errorf("name %q is a Windows device name", name)
	}
}

// FuzzSafeFileName checks that whatever a parameter holds, the name is safe or empty.
func FuzzSafeFileName(f *testing.F) {
	for _, s := range []string{"orders", "con", "a/b", " .x. ", "\u202e", strings.Repeat("€", 100), "LPT¹.txt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name := safeFileName(s); name != "" {
			checkSafeName(t, name)
		}
	})
}
