package cli

import (
	"strings"
	"testing"
	"time"

	"sheetq/internal/apiv1"
)

// screen renders what a terminal shows for out: \r returns to the line's start, ESC[K
// erases to its end, \n starts a new line, other bytes overwrite.
func screen(out string) []string {
	lines := []string{""}
	col := 0
	for i := 0; i < len(out); i++ {
		cur := []rune(lines[len(lines)-1])
		switch {
		case out[i] == '\r':
			col = 0
		case out[i] == '\n':
			lines = append(lines, "")
			col = 0
		case strings.HasPrefix(out[i:], "\x1b[K"):
			lines[len(lines)-1] = string(cur[:min(col, len(cur))])
			i += 2
		default:
			if col < len(cur) {
				cur[col] = rune(out[i])
			} else {
				cur = append(cur, rune(out[i]))
			}
			lines[len(lines)-1] = string(cur)
			col++
		}
	}
	return lines
}

// The finished line, shorter than a running one with its ETA, leaves nothing of it on
// the terminal (it used to end "100%    A 0s").
func TestProgressFinishedLineClears(t *testing.T) {
	var out strings.Builder
	p := newProgress(&out, true)
	total := int64(50000)
	job := apiv1.Job{ID: "2al5iiistngsual3n5h37xldr6", Status: "PROCESSING", Attempt: 1, MaxAttempts: 3,
		Progress: apiv1.Progress{Rows: 0, TotalRows: &total}}
	p.update(job)
	p.rateStart = time.Now().Add(-10 * time.Second) // 10 s in: an ETA is shown
	job.Progress.Rows = 25000
	p.update(job)
	if !strings.Contains(out.String(), "ETA 10s") {
		t.Fatalf("no ETA drawn: %q", out.String())
	}
	job.Status, job.Progress.Rows = "SUCCEEDED", 50000
	p.update(job)
	p.done()
	lines := screen(out.String())
	want := "2al5iiis SUCCEEDED  [" + strings.Repeat("#", 30) + "] 50000/50000 rows, 100%"
	if len(lines) != 2 || lines[0] != want || lines[1] != "" {
		t.Fatalf("the terminal shows %q, want %q and a new line", lines, want)
	}
}
