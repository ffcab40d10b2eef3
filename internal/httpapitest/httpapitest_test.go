package httpapitest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"sheetq/internal/httpapitest"
)

type page struct {
	Data  []map[string]any `json:"data"`
	Links struct {
		Next *string `json:"next"`
	} `json:"links"`
	Meta struct {
		NextCursor *string `json:"next_cursor"`
	} `json:"meta"`
}

func get(t *testing.T, url string) (*http.Response, page) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p page
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp, p
}

// Every style walks the whole dataset, in order, and says where its end is.
func TestStylesWalkTheDataset(t *testing.T) {
	srv := httpapitest.NewServer(httpapitest.Options{Rows: 25, PageSize: 10})
	defer srv.Close()
	ids := func(p page) (out []float64) {
		for _, r := range p.Data {
			out = append(out, r["id"].(float64))
		}
		return out
	}
	walk := func(first string, next func(*http.Response, page) string) int {
		n, url := 0, srv.URL+first
		for url != "" {
			resp, p := get(t, url)
			for _, id := range ids(p) {
				n++
				if id != float64(n) {
					t.Fatalf("%s: row %d has id %v", first, n, id)
				}
			}
			url = next(resp, p)
		}
		return n
	}
	link := func(resp *http.Response, _ page) string {
		for _, part := range strings.Split(resp.Header.Get("Link"), ",") {
			if strings.Contains(part, `rel="next"`) {
				return srv.URL + strings.Trim(strings.TrimSpace(strings.Split(part, ";")[0]), "<>")
			}
		}
		return ""
	}
	nextURL := func(_ *http.Response, p page) string {
		if p.Links.Next == nil {
			return ""
		}
		return srv.URL + "/next/" + *p.Links.Next
	}
	cursor := func(_ *http.Response, p page) string {
		if p.Meta.NextCursor == nil {
			return ""
		}
		return srv.URL + "/cursor/items?cursor=" + *p.Meta.NextCursor
	}
	pg := 1
	pageNo := func(_ *http.Response, p page) string {
		if len(p.Data) == 0 {
			return ""
		}
		pg++
		return srv.URL + "/page/items?page=" + strconv.Itoa(pg)
	}
	for _, tc := range []struct {
		first string
		next  func(*http.Response, page) string
	}{{"/link/items", link}, {"/next/items", nextURL}, {"/cursor/items", cursor}, {"/page/items", pageNo}} {
		if n := walk(tc.first, tc.next); n != 25 {
			t.Errorf("%s: %d rows, want 25", tc.first, n)
		}
	}
	if _, p := get(t, srv.URL+"/offset/items?offset=20&limit=10"); len(p.Data) != 5 {
		t.Errorf("offset 20: %d rows", len(p.Data))
	}
}

// The knobs act on the requests they are set for, and the counts see every request.
func TestKnobsAndCounts(t *testing.T) {
	srv := httpapitest.NewServer(httpapitest.Options{Rows: 100, PageSize: 10, Bearer: "t"})
	defer srv.Close()
	if resp, _ := get(t, srv.URL+"/page/items"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %s", resp.Status)
	}
	srv.Fail(2, http.StatusTooManyRequests, 1, "3")
	req := func(path string) *http.Response {
		r, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		r.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := req("/page/items?page=2"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("first try of page 2: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp := req("/page/items?page=2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("second try of page 2: %s", resp.Status)
	}
	srv.Garble(3)
	if resp := req("/offset/items?offset=20"); resp.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("garbled page: %s", resp.Header.Get("Content-Type"))
	}
	srv.Oversize(4, 1<<20)
	if resp := req("/page/items?page=4"); resp.ContentLength < 1<<20 {
		t.Fatalf("oversized page: %d bytes", resp.ContentLength)
	}
	// The unauthorized request has no page count: it never reached the page.
	if srv.Requests(2) != 2 || srv.Requests(3) != 1 || srv.Total() != 4 {
		t.Fatalf("counts: page 2 %d, page 3 %d, total %d (%v)", srv.Requests(2), srv.Requests(3), srv.Total(), srv.Log())
	}
}
