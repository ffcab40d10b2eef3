package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// The Queue page as a dashboard: the counts open the filtered list, the charts scale to
// their data, and the tables say what runs where and what waits in which position.
func TestUIQueueDashboard(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	ok := ts.create(`{"report":"demo","params":{"rows":2}}`)
	ts.waitStatus(ok.ID, store.StatusSucceeded)
	bad := ts.create(`{"report":"demo","params":{"rows":2,"fail_first":1}}`)
	ts.waitStatus(bad.ID, store.StatusFailed)

	// Two slow exports hold both workers; 53 more wait behind them.
	var running, waiting []string
	for range 2 {
		running = append(running, ts.create(`{"report":"demo","params":{"rows":1000,"seconds":120}}`).ID)
	}
	for _, id := range running {
		ts.waitStatus(id, store.StatusProcessing)
	}
	for range 53 {
		waiting = append(waiting, ts.create(`{"report":"demo","params":{"rows":1}}`).ID)
	}

	doc := apptest.Page(t, ts.Get("/queue"), http.StatusOK)
	for _, status := range []string{"PENDING", "PROCESSING", "SUCCEEDED", "FAILED", "CANCELED", "EXPIRED"} {
		link := apptest.TID(doc, "count-link-"+status)
		if href := link.AttrOr("href", ""); href != "/?status="+status {
			t.Errorf("count-link-%s href %q", status, href)
		}
		if apptest.TID(link, "count-"+status).Length() != 1 {
			t.Errorf("count-%s is not inside its link", status)
		}
	}
	// The link opens the exports list filtered by that state.
	list := apptest.Page(t, ts.Get(apptest.TID(doc, "count-link-FAILED").AttrOr("href", "")), http.StatusOK)
	if !strings.Contains(string(must(list.Html())), bad.ID) || strings.Contains(string(must(list.Html())), ok.ID) {
		t.Error("/?status=FAILED does not list just the failed export")
	}

	rows := apptest.TID(doc, "running-row")
	if rows.Length() != 2 {
		t.Fatalf("running rows %d, want 2", rows.Length())
	}
	rows.Each(func(i int, r *goquery.Selection) {
		id := r.AttrOr("data-id", "")
		if id != running[0] && id != running[1] {
			t.Errorf("running row %d is %s", i, id)
		}
		if href := r.Find("a").AttrOr("href", ""); href != "/exports/"+id || strings.TrimSpace(r.Find("a").Text()) != "Demo rows" {
			t.Errorf("running row link %q %q", href, r.Find("a").Text())
		}
		cells := r.Find("td")
		if got := strings.TrimSpace(cells.Eq(1).Text()); got != "exports" {
			t.Errorf("queue %q", got)
		}
		if got := strings.TrimSpace(cells.Eq(2).Text()); got == "" {
			t.Error("no worker")
		}
		if ms, err := strconv.Atoi(apptest.TID(r, "running-for").AttrOr("data-elapsed-ms", "")); err != nil || ms < 0 {
			t.Errorf("running-for data-elapsed-ms %v", err)
		}
	})

	wrows := apptest.TID(doc, "waiting-row")
	if wrows.Length() != 50 {
		t.Fatalf("waiting rows %d, want the first 50", wrows.Length())
	}
	wrows.Each(func(i int, r *goquery.Selection) {
		// One priority, runnable now: claim order is arrival order.
		if id, pos := r.AttrOr("data-id", ""), r.AttrOr("data-position", ""); id != waiting[i] || pos != strconv.Itoa(i+1) {
			t.Errorf("waiting row %d: %s at %s, want %s at %d", i, id, pos, waiting[i], i+1)
		}
	})
	if got := strings.TrimSpace(apptest.TID(doc, "waiting-more").Text()); got != "and 3 more" {
		t.Errorf("waiting-more %q", got)
	}
	if apptest.TID(doc, "running-more").Length() != 0 {
		t.Error("running-more with all running listed")
	}

	// Throughput: one succeeded and one failed, in one slot or two: the axis ends at
	// the highest stack, not at 100.
	if top := apptest.TID(doc, "chart-throughput").AttrOr("data-top", ""); top != "1" && top != "2" {
		t.Errorf("throughput top %q", top)
	}
	for _, id := range []string{"chart-throughput", "chart-depth", "chart-wait", "chart-run"} {
		svg := apptest.TID(doc, id)
		if svg.Length() != 1 || goquery.NodeName(svg) != "svg" || svg.AttrOr("width", "") != "100%" {
			t.Errorf("%s: not one full-width svg", id)
		}
	}
	if wait, run := apptest.TID(doc, "chart-wait").AttrOr("data-top", ""), apptest.TID(doc, "chart-run").AttrOr("data-top", ""); wait != run {
		t.Errorf("wait and run scales differ: %q, %q", wait, run)
	}
	if note := apptest.TID(doc, "depth-note").Text(); !strings.Contains(note, "since this server started") {
		t.Errorf("depth-note %q", note)
	}
	// The sampler (every 5 s) sees the 53 waiting.
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		d := apptest.Page(t, ts.Get("/queue"), http.StatusOK)
		vals := []string{}
		apptest.TID(d, "chart-depth").Find("rect").Each(func(_ int, r *goquery.Selection) { vals = append(vals, r.AttrOr("data-value", "")) })
		for _, v := range vals {
			if v == "53" {
				return true, ""
			}
		}
		return false, "depth bars " + strings.Join(vals, ",")
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
