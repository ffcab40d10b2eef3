package export

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"sheetq/store"
)

// maxFilenamePattern is the longest "-- filename:" pattern accepted, in bytes.
const maxFilenamePattern = 200

// maxDownloadBase is the longest download name before its extension, in bytes: well
// under the 255 bytes most file systems take, with room for a browser's " (1)".
const maxDownloadBase = 150

// filenamePart is a piece of a "-- filename:" pattern: literal text, or a parameter.
type filenamePart struct {
	text  string
	param bool // text is a parameter's name
}

// parseFilename splits a "-- filename:" pattern into its parts: {name} is the value of
// the parameter name, which params must declare unless anyParam is set. The message
// says what is wrong.
func parseFilename(pattern string, params []Param, anyParam bool) ([]filenamePart, string) {
	switch {
	case len(pattern) > maxFilenamePattern:
		return nil, fmt.Sprintf("filename: the pattern is longer than %d bytes", maxFilenamePattern)
	case strings.ContainsAny(pattern, `/\`):
		return nil, "filename: a name has no folders: leave out / and \\"
	case strings.ContainsFunc(pattern, unicode.IsControl):
		return nil, "filename: control characters are not allowed"
	}
	for _, ext := range []string{".xlsx", ".csv"} {
		if strings.HasSuffix(strings.ToLower(pattern), ext) {
			return nil, fmt.Sprintf("filename: leave out the extension %s: the export's format adds it", ext)
		}
	}
	var parts []filenamePart
	for rest := pattern; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			parts = append(parts, filenamePart{text: rest})
			break
		}
		if open > 0 {
			parts = append(parts, filenamePart{text: rest[:open]})
		}
		if rest[open] == '}' {
			return nil, fmt.Sprintf("filename: } without { in %q", pattern)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Sprintf("filename: { without } in %q", pattern)
		}
		name := rest[open+1 : open+end]
		declared := make([]string, len(params))
		for i, p := range params {
			declared[i] = p.Name
		}
		switch {
		case name == "":
			return nil, "filename: {} names no parameter; write {NAME} with a declared param"
		case !anyParam && !slices.Contains(declared, name):
			known := "the report declares no params"
			if len(declared) > 0 {
				known = "declared: " + strings.Join(declared, ", ")
			}
			return nil, fmt.Sprintf("filename: unknown parameter {%s} (%s)", name, known)
		}
		parts = append(parts, filenamePart{text: name, param: true})
		rest = rest[open+end+1:]
	}
	return parts, ""
}

// renderFilename fills a pattern, checked when its job was accepted, with the job's
// parameters. A value missing from params leaves its place empty.
func renderFilename(pattern string, params map[string]any) string {
	parts, _ := parseFilename(pattern, nil, true)
	var b strings.Builder
	for _, p := range parts {
		if !p.param {
			b.WriteString(p.text)
			continue
		}
		switch v := params[p.text].(type) {
		case nil:
		case string:
			b.WriteString(v)
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		case json.Number:
			b.WriteString(v.String())
		default:
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// windowsDevice reports whether stem, a name's part before its first dot, is a device
// name that Windows refuses as a file name whatever follows (CON.xlsx too).
func windowsDevice(stem string) bool {
	s := strings.ToUpper(strings.TrimRight(stem, " "))
	switch s {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(s) < 4 || (s[:3] != "COM" && s[:3] != "LPT") {
		return false
	}
	switch d := s[3:]; d {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
		return true
	}
	return false
}

// safeFileName makes name (without its extension) a file name that Windows, macOS and
// Linux all accept and that shows as written: / \ : * ? " < > | and control or
// invisible formatting characters become -, leading and trailing dots and spaces go
// (a leading dot hides a file, Windows drops trailing ones), a Windows device name
// (CON, NUL, COM1, ...) gets a _ after it, and the name is cut to maxDownloadBase bytes.
// It returns "" when nothing is left.
func safeFileName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune(`/\:*?"<>|`, r), unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == utf8.RuneError:
			return '-'
		}
		return r
	}, name)
	trim := func(s string) string { return strings.Trim(s, ". \u00a0") }
	name = trim(name)
	if len(name) > maxDownloadBase {
		cut := maxDownloadBase
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = trim(name[:cut])
	}
	if stem, _, _ := strings.Cut(name, "."); windowsDevice(stem) {
		name = strings.TrimRight(stem, " ") + "_" + name[len(stem):]
	}
	return name
}

// DownloadName is the name a browser saves job j's file as, a its decoded args (the
// caller has them already: JobJSON, the file's download): the pattern of the report's
// "-- filename:" line as the job was accepted with, filled with the job's params and
// made safe; without one, or if nothing of it is left, <report>-<YYYY-MM-DD>-<short id>,
// the day the job finished (or was created); the extension is the args' format's.
func DownloadName(a Args, j store.Job) string {
	ext := a.FileExt()
	if a.Spec != nil && a.Spec.Filename != "" {
		if name := safeFileName(renderFilename(a.Spec.Filename, a.Params)); name != "" {
			return name + ext
		}
	}
	day := j.FinishedAt
	if day.IsZero() {
		day = j.CreatedAt
	}
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, a.Report)
	if safe == "" {
		safe = "export"
	}
	short := j.ID
	if len(short) > 8 {
		short = short[:8]
	}
	return safe + "-" + day.UTC().Format("2006-01-02") + "-" + short + ext
}
