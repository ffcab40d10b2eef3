package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// size is the committer's file length.
func (c *committer) size() (int64, error) {
	st, err := c.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// post sends n accept requests at once and returns their answers' ids.
func post(t *testing.T, url string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := http.Post(url+"/api/v1/exports", "application/json", strings.NewReader(`{"report":"demo","params":{"rows":1}}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var j struct{ ID, Status string }
			if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&j) != nil || j.Status != "PENDING" {
				t.Errorf("answer %d %+v", resp.StatusCode, j)
			}
			ids[i] = j.ID
		})
	}
	wg.Wait()
	return ids
}

// Every 202 waits for its request's bytes: after n answers the appended file holds n
// requests' worth, and the ring's write position moved as far; no two ids are alike.
func TestCommitsBeforeAnswering(t *testing.T) {
	const n, per = 40, 4096
	for _, mode := range []string{"append", "overwrite"} {
		t.Run(mode, func(t *testing.T) {
			c, err := newCommitter(mode, t.TempDir(), per)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(handler(c))
			ids := post(t, ts.URL, n)
			size, err := c.size() // every request answered: every request's bytes written
			ts.Close()
			c.close()
			seen := map[string]bool{}
			for _, id := range ids {
				if id == "" || seen[id] {
					t.Fatalf("ids %v", ids)
				}
				seen[id] = true
			}
			if mode == "overwrite" {
				size = c.off
			}
			if err != nil || size != n*per {
				t.Fatalf("%s: %d bytes committed (%v), want %d", mode, size, err, n*per)
			}
		})
	}
}

// -sync off answers at once; a request without a report is refused with 400, and an
// unknown mode or size is an error at start.
func TestOffAndRefusals(t *testing.T) {
	c, err := newCommitter("off", t.TempDir(), 1)
	if c != nil || err != nil {
		t.Fatalf("off: %v, %v", c, err)
	}
	ts := httptest.NewServer(handler(nil))
	defer ts.Close()
	if ids := post(t, ts.URL, 3); len(ids) != 3 {
		t.Fatal(ids)
	}
	resp, err := http.Post(ts.URL+"/api/v1/exports", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no report: %d", resp.StatusCode)
	}
	for _, bad := range []struct {
		mode string
		per  int
	}{{"fsync", 1}, {"append", 0}, {"append", ringSize}} {
		if _, err := newCommitter(bad.mode, t.TempDir(), bad.per); err == nil {
			t.Errorf("%s %d accepted", bad.mode, bad.per)
		}
	}
}
