package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// An http source's place in an export (ARCHITECTURE.md, "Checkpoints and resume") is a
// page and how many of its rows are written: a resumed export requests that page
// again, skips those rows, and goes on from there as it would have. The token is JSON
// the job store keeps, so it holds what a new process needs and nothing secret: the
// page's URL (credentials go in headers, never in a URL), its number, the rows to skip,
// and the columns, so that the resumed file keeps the first attempt's.

// httpToken is the Position.Token of an http source.
type httpToken struct {
	URL     string        `json:"url"`  // the page to request again, absolute
	Page    int64         `json:"page"` // its number in the export, from 1
	Skip    int64         `json:"skip"` // its rows already written
	Columns []tokenColumn `json:"columns,omitempty"`
}

// tokenColumn is a column as a token keeps it.
type tokenColumn struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

func parseHTTPToken(raw json.RawMessage) (httpToken, error) {
	var tok httpToken
	if len(raw) == 0 {
		return tok, errors.New("the checkpoint has no token")
	}
	if err := json.Unmarshal(raw, &tok); err != nil {
		return tok, fmt.Errorf("the checkpoint's token is not an http source's: %v", err)
	}
	if tok.URL == "" {
		return tok, errors.New("the checkpoint's token names no page")
	}
	return tok, nil
}

// pageEntry is a page whose rows have been, or are being, sent.
type pageEntry struct {
	url   string
	page  int64
	first int64 // the rows of the export before it
	rows  int64
}

// pageLog is what the Placer answers from, on the writer's goroutine, while the stream
// goes on: the pages sent since the last rows it was asked about. The writer may lag
// some pages behind the source, so it keeps them all until asked for a row past them.
type pageLog struct {
	mu    sync.Mutex
	pages []pageEntry
	cols  []tokenColumn
}

func (l *pageLog) add(e pageEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pages = append(l.pages, e)
}

func (l *pageLog) setColumns(cols []Column) {
	if cols == nil {
		return
	}
	tc := make([]tokenColumn, len(cols))
	for i, c := range cols {
		tc[i] = tokenColumn{Name: c.Name, Type: c.Type}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cols = tc
}

// token implements Placer: the token that continues after the first rows rows. It is
// the last page that starts at or before rows (an empty page ahead of a full one
// starts where it does, and the full one is the place); a row count at the end of
// the last page sent names that page with all of its rows to skip. Pages before the
// one named are forgotten: the writer never asks about fewer rows than before.
func (l *pageLog) token(rows int64, _ []any) (json.RawMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.pages) - 1
	for i >= 0 && l.pages[i].first > rows {
		i--
	}
	switch {
	case i < 0 && len(l.pages) == 0:
		return nil, fmt.Errorf("no page sent yet to place row %d in", rows)
	case i < 0:
		return nil, fmt.Errorf("row %d comes before the pages kept (from row %d): a placer is asked in order", rows, l.pages[0].first)
	case rows > l.pages[i].first+l.pages[i].rows:
		return nil, fmt.Errorf("row %d is past the rows sent (%d)", rows, l.pages[i].first+l.pages[i].rows)
	}
	p := l.pages[i]
	l.pages = l.pages[i:]
	return json.Marshal(httpToken{URL: p.url, Page: p.page, Skip: rows - p.first, Columns: l.cols})
}
