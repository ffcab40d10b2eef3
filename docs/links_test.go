// Package docs_test checks the repository's Markdown: every relative link in README.md, in
// docs/*.md and in ARCHITECTURE.md, RELIABILITY.md and BENCHMARKS.md names a file that
// exists, and a #fragment names a heading of that file, so that moving a section from one
// page to another cannot leave a link to nowhere. It reads files relative to this folder.
package docs_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// referencePages are the pages the README sends its readers to (issue 37): each must exist
// and be linked from README.md.
var referencePages = []string{
	"api.md", "browser-ui.md", "cli.md", "development.md", "how-it-works.md",
	"operations.md", "reports-and-sources.md", "schedules.md", "self-hosting.md",
	"several-nodes.md",
}

// checkedFiles lists the Markdown files whose links must resolve: the repository's own
// documents and every page in this folder.
func checkedFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "../ARCHITECTURE.md", "../RELIABILITY.md", "../BENCHMARKS.md"}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, pages...)
}

func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range checkedFiles(t) {
		problems, n, err := brokenLinks(file)
		if err != nil {
			t.Fatal(err)
		}
		checked += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	if checked < 20 {
		t.Fatalf("found only %d relative links: the link scanner is broken", checked)
	}
}

func TestReadmeLinksEveryReferencePage(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range links(string(text)) {
		if path, _, ok := relative(l.target); ok {
			linked[filepath.Clean(path)] = true
		}
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range referencePages {
		if !slices.Contains(pages, want) {
			t.Errorf("docs/%s is missing", want)
		}
	}
	for _, page := range pages {
		if !linked[filepath.Join("docs", page)] {
			t.Errorf("README.md does not link docs/%s", page)
		}
	}
}

// TestBrokenLinksAreFound runs the checker on a page with known broken links: a checker
// that finds nothing would pass every other test here.
func TestBrokenLinksAreFound(t *testing.T) {
	t.Parallel()
	problems, n, err := brokenLinks("testdata/page.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`testdata/page.md:11: link "missing.md": stat testdata/missing.md: no such file or directory`,
		`testdata/page.md:12: link "other.md#no-such-heading": other.md has no heading "no-such-heading"`,
		`testdata/page.md:13: link "#Try-it": page.md has no heading "Try-it"`,
		`testdata/page.md:14: link "img/nothing.png": stat testdata/img/nothing.png: no such file or directory`,
		`testdata/page.md:16: link "#a-heading-2": page.md has no heading "a-heading-2"`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if n != 11 {
		t.Errorf("checked %d relative links, want 11", n)
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ heading, want string }{
		{"Try it", "try-it"},
		{"HTTP API (v1)", "http-api-v1"},
		{"Live events: `GET /api/v1/events`", "live-events-get-apiv1events"},
		{"The .xlsx file", "the-xlsx-file"},
		{"Delivering a schedule's file", "delivering-a-schedules-file"},
		{"Against River's SQLite driver (issue 16, 2026-12-01)", "against-rivers-sqlite-driver-issue-16-2026-12-01"},
		{"Access tokens and sign-in", "access-tokens-and-sign-in"},
		{"[Linked](x.md) *and* **bold**", "linked-and-bold"},
		{"snake_case and Ümlaut", "snake_case-and-ümlaut"},
	} {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// brokenLinks returns one line per relative link in file that does not resolve, and how
// many relative links it checked.
func brokenLinks(file string) (problems []string, checked int, err error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	own := anchors(string(text))
	for _, l := range links(string(text)) {
		path, fragment, ok := relative(l.target)
		if !ok {
			continue
		}
		checked++
		if msg := resolve(file, own, path, fragment); msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", file, l.line, l.target, msg))
		}
	}
	return problems, checked, nil
}

// resolve says what is wrong with a link from file to path#fragment, or "" when nothing is.
func resolve(file string, own map[string]bool, path, fragment string) string {
	target, headings := filepath.Base(file), own
	if path != "" {
		full := filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if fragment == "" || !strings.HasSuffix(strings.ToLower(path), ".md") {
			if _, err := os.Stat(full); err != nil {
				return err.Error()
			}
			return ""
		}
		text, err := os.ReadFile(full)
		if err != nil {
			return err.Error()
		}
		target, headings = path, anchors(string(text))
	}
	if fragment != "" && !headings[fragment] {
		return fmt.Sprintf("%s has no heading %q", target, fragment)
	}
	return ""
}

// relative splits a link target into its path and fragment; ok is false for a link that
// leaves the repository (a scheme such as https: or mailto:) or is empty.
func relative(target string) (path, fragment string, ok bool) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" || target == "" {
		return "", "", false
	}
	return u.Path, u.Fragment, true
}

// A link is a link's target and the line it is on.
type link struct {
	line   int
	target string
}

var (
	fence     = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan  = regexp.MustCompile("(?s)``.+?``|`[^`]+`")
	inline    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	reference = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	htmlAttr  = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
)

// links returns the targets of the text's links and images (Markdown inline and reference
// links, and HTML href and src attributes), outside code blocks and code spans.
func links(text string) []link {
	prose := withoutCode(text)
	var out []link
	for _, re := range []*regexp.Regexp{inline, reference, htmlAttr} {
		for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
			out = append(out, link{
				line:   strings.Count(prose[:m[0]], "\n") + 1,
				target: prose[m[2]:m[3]],
			})
		}
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

// withoutCode blanks fenced code blocks and code spans, keeping every line break so that
// line numbers stay right.
func withoutCode(text string) string {
	lines := strings.Split(text, "\n")
	inFence := false
	for i, l := range lines {
		if fence.MatchString(l) {
			inFence = !inFence
			lines[i] = ""
		} else if inFence {
			lines[i] = ""
		}
	}
	return codeSpan.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	})
}

var (
	heading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	htmlID  = regexp.MustCompile(`(?i)<a\s[^>]*\b(?:name|id)\s*=\s*"([^"]+)"`)
)

// anchors returns the fragments that name a place in a Markdown file: its headings' GitHub
// anchors (a repeated heading gets -1, -2, ...) and explicit <a name> or id attributes.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for l := range strings.SplitSeq(text, "\n") {
		if fence.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
var htmlTag = regexp.MustCompile(`<[^>]+>`)

// slug is GitHub's anchor for a heading: its text as shown (links and tags reduced to their
// text), in lower case, with every character but letters, digits, '_', '-' and spaces
// dropped, and each space made a '-'.
func slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
