//go:build !windows

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"sheetq/internal/client"
	"sheetq/store"
)

// The browser tests drive the real binary's pages with headless Chromium, through the
// data-testid contract the pages keep. Every wait polls a condition against a deadline.

const chromiumPath = "/usr/bin/chromium"

// How long one browser step may take, and how long a job-sized wait may take.
const (
	stepTimeout = 20 * time.Second
	jobTimeout  = 60 * time.Second
)

// tab is one browser tab on one sheetq server.
type tab struct {
	t     *testing.T
	ctx   context.Context // the tab's chromedp context; it has no deadline (see chromedp.Run)
	close func()          // closes the tab
	base  string          // the server's URL, no trailing slash
}

// newTab starts a headless Chromium for the test and opens a tab on base. Without
// Chromium the test is skipped, except on CI, which must not skip it silently.
func newTab(t *testing.T, base string) *tab {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but there is no %s: %v", chromiumPath, err)
		}
		t.Skipf("no %s: install Debian's chromium to run the browser tests", chromiumPath)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first Run starts the browser, and the browser lives as long as that call's
	// context: so it runs on the undeadlined ctx, bounded from outside by a timer.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(stepTimeout):
		t.Fatalf("chromium did not start within %s", stepTimeout)
	}
	b := &tab{t: t, ctx: ctx, base: strings.TrimSuffix(base, "/"), close: cancelTab}
	b.watchExceptions()
	return b
}

// another opens a second tab in the same browser.
func (b *tab) another() *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	var once sync.Once
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)) }()
	select {
	case err := <-started:
		if err != nil {
			b.t.Fatalf("open a second tab: %v", err)
		}
	case <-time.After(stepTimeout):
		b.t.Fatalf("no second tab within %s", stepTimeout)
	}
	o := &tab{t: b.t, ctx: ctx, base: b.base, close: func() { once.Do(cancel) }}
	o.watchExceptions()
	return o
}

// watchExceptions fails the test, at its end, if a page threw an uncaught JavaScript
// exception: the pages' script must not break however the server behaves.
func (b *tab) watchExceptions() {
	var (
		mu  sync.Mutex
		all []string
	)
	err := chromedp.Listen(b.ctx, func(ev any) {
		e, ok := ev.(*runtime.EventExceptionThrown)
		if !ok || e.ExceptionDetails == nil {
			return
		}
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		mu.Lock()
		all = append(all, fmt.Sprintf("%s:%d: %s", d.URL, d.LineNumber+1, msg))
		mu.Unlock()
	})
	if err != nil {
		b.t.Fatalf("listen for page exceptions: %v", err)
	}
	b.t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range all {
			b.t.Errorf("uncaught exception in a page: %s", m)
		}
	})
}

// tid is the CSS selector of an element by its data-testid.
func tid(name string) string { return `[data-testid="` + name + `"]` }

// rowSel is the CSS selector of the home page's row of one job.
func rowSel(id string) string { return tid("export-row") + `[data-id="` + id + `"]` }

// js quotes s as a JavaScript string literal.
func js(s string) string { return strconv.Quote(s) }

// do runs the actions within d and fails the test, with what the page shows, on error.
func (b *tab) do(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := b.try(d, actions...); err != nil {
		b.fatalf("%s: %v", what, err)
	}
}

// try runs the actions within d.
func (b *tab) try(d time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// fatalf fails the test and logs where the tab is and what its page says.
func (b *tab) fatalf(format string, args ...any) {
	b.t.Helper()
	b.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), b.describe())
}

// describe is the tab's location and the start of its page's HTML, for failure messages.
func (b *tab) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.outerHTML : "(no body)")`))
	if err != nil {
		return "page: (unreadable: " + err.Error() + ")"
	}
	if len(loc) > 6000 {
		loc = loc[:6000] + "…"
	}
	return "page: " + loc
}

// open navigates to path on the server and waits until the page has a body.
func (b *tab) open(path string) {
	b.t.Helper()
	b.do("open "+path, stepTimeout, chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("body")))
}

// click clicks the first element that matches sel once it is visible.
func (b *tab) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, stepTimeout, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *tab, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// mustEval is eval that fails the test on error.
func mustEval[T any](b *tab, expr string) T {
	b.t.Helper()
	v, err := eval[T](b, expr)
	if err != nil {
		b.fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls the boolean expression until it holds, for at most d. Errors while
// polling are tolerated (the page may be navigating), but the last one is reported.
// Each poll's page state can be sampled by observe, which may be nil.
func (b *tab) waitFor(what string, d time.Duration, expr string, observe func()) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if observe != nil {
			observe()
		}
		ok, err := eval[bool](b, expr)
		if err == nil && ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			b.fatalf("timed out after %s waiting for %s (last error: %v)", d, what, lastErr)
		}
		<-tick.C
	}
}

// visibleExpr is a JavaScript expression: an element matches sel and is rendered.
func visibleExpr(sel string) string {
	return `(() => { const e = document.querySelector(` + js(sel) + `); return !!e && !e.closest("[hidden]") && e.getClientRects().length > 0; })()`
}

// waitVisible waits until an element that matches sel is rendered.
func (b *tab) waitVisible(sel string, d time.Duration) {
	b.t.Helper()
	b.waitFor(sel+" visible", d, visibleExpr(sel), nil)
}

// attr is an attribute of the first element that matches sel ("" when absent).
func (b *tab) attr(sel, name string) string {
	b.t.Helper()
	return mustEval[string](b, `(() => { const e = document.querySelector(`+js(sel)+`); return e ? (e.getAttribute(`+js(name)+`) ?? "") : ""; })()`)
}

// text is the trimmed text of the first element that matches sel ("" when absent).
func (b *tab) text(sel string) string {
	b.t.Helper()
	return mustEval[string](b, `(() => { const e = document.querySelector(`+js(sel)+`); return e ? e.textContent.trim().replace(/\s+/g, " ") : ""; })()`)
}

// count is how many elements match sel.
func (b *tab) count(sel string) int {
	b.t.Helper()
	return mustEval[int](b, `document.querySelectorAll(`+js(sel)+`).length`)
}

// waitAttr waits until the first element that matches sel has the attribute value.
func (b *tab) waitAttr(sel, name, value string, d time.Duration) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%s[%s=%q]", sel, name, value), d,
		`(() => { const e = document.querySelector(`+js(sel)+`); return !!e && e.getAttribute(`+js(name)+`) === `+js(value)+`; })()`, nil)
}

// setMarker puts a value on window that only survives while the page is not reloaded
// or left: checkMarker then proves an update came live, not from a navigation.
func (b *tab) setMarker() {
	b.t.Helper()
	mustEval[bool](b, `(window.__sheetqE2E = location.href, true)`)
}

func (b *tab) checkMarker(when string) {
	b.t.Helper()
	if ok := mustEval[bool](b, `window.__sheetqE2E === location.href`); !ok {
		b.fatalf("%s: the page was reloaded or left (the window marker is gone)", when)
	}
}

// progressExpr reads a progress element's value: aria-valuenow, else a <progress>'s
// value attribute; "" when there is no element or no known value.
func progressExpr(sel string) string {
	return `(() => { const e = document.querySelector(` + js(sel) + `); if (!e) return "";
		const v = e.getAttribute("aria-valuenow") ?? e.getAttribute("value"); return v ?? ""; })()`
}

// download clicks sel with downloads going to a temporary directory and returns the
// downloaded file's bytes and the name the server suggested for it.
func (b *tab) download(sel string) ([]byte, string) {
	b.t.Helper()
	dir := b.t.TempDir()
	ctx, cancel := context.WithTimeout(b.ctx, jobTimeout)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior:      browser.SetDownloadBehaviorBehaviorAllowAndName,
		DownloadPath:  dir,
		EventsEnabled: ptrTo(true),
	}); err != nil {
		b.fatalf("set download behaviour: %v", err)
	}
	// Subscribe before the click, so that no event can come too early.
	begin := chromedp.BrowserEvents(ctx, browser.DownloadWillBegin)
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	b.click(sel)
	var name string
	for ev, err := range begin {
		if err != nil {
			b.fatalf("no download after clicking %s: %v", sel, err)
		}
		name = ev.SuggestedFilename
		break
	}
	for ev, err := range progress {
		if err != nil {
			b.fatalf("download after clicking %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			// allowAndName names the file after the download's GUID.
			data, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				b.fatalf("downloaded file: %v", err)
			}
			return data, name
		case browser.DownloadProgressStateCanceled:
			b.fatalf("the download of %s was canceled", sel)
		}
	}
	b.fatalf("no completed download after clicking %s", sel)
	return nil, ""
}

func ptrTo[T any](v T) *T { return &v }

// Screenshots: desktop and phone widths, full page height.
var viewports = []struct {
	name          string
	width, height int64
	mobile        bool
}{
	{"desktop", 1280, 800, false},
	{"phone", 390, 844, true},
}

// screenshotDir is where screenshots go: SHEETQ_SCREENSHOTS (relative to the repository
// root, the parent of this package's directory, unless absolute) when set, else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SHEETQ_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shoot saves full-page PNG screenshots of the current page as <name>-desktop.png and
// <name>-phone.png in dir, and leaves the tab at the desktop size.
func (b *tab) shoot(dir, name string) {
	b.t.Helper()
	for _, v := range viewports {
		emulate := chromedp.EmulateViewport(v.width, v.height)
		if v.mobile {
			emulate = chromedp.EmulateViewport(v.width, v.height, chromedp.EmulateMobile)
		}
		b.do("emulate "+v.name, stepTimeout, emulate,
			// Two animation frames: the page has laid itself out at the new size.
			chromedp.Evaluate[chromedp.Void](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`, chromedp.EvalAwaitPromise))
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			b.fatalf("screenshot %s %s: %v", name, v.name, err)
		}
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			b.fatalf("screenshot %s %s is not a PNG", name, v.name)
		}
		if err := os.WriteFile(filepath.Join(dir, name+"-"+v.name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.do("emulate desktop", stepTimeout, chromedp.EmulateViewport(1280, 800))
}

// terminate stops the server with SIGTERM, as a service manager would, and waits for
// it to exit cleanly.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("sheetq exited %d after SIGTERM\n%s", code, p.log())
	}
}

// errNoJobID: a URL that is not a job page's.
var errNoJobID = errors.New("not a job page URL")

// jobIDFromURL is the {id} of a /exports/{id} URL.
func jobIDFromURL(u string) (string, error) {
	i := strings.Index(u, "/exports/")
	if i < 0 {
		return "", errNoJobID
	}
	id := u[i+len("/exports/"):]
	if j := strings.IndexAny(id, "/?#"); j >= 0 {
		id = id[:j]
	}
	if id == "" || id == "new" {
		return "", errNoJobID
	}
	return id, nil
}

// exportInEachStatus makes one export of each status the pages show, in order: one that
// succeeded, one that failed (out of attempts), one canceled while it ran, and one still
// running with progress (a 600 s demo: cancel it when done with it).
func (p *proc) exportInEachStatus(t *testing.T) (ok, failed, canceled, running client.Job) {
	t.Helper()
	ok = p.submit(t, `{"report":"demo","params":{"rows":2500}}`)
	p.waitJob(t, ok.ID, "SUCCEEDED", status("SUCCEEDED"))
	failed = p.submit(t, `{"report":"demo","params":{"rows":100,"fail_first":5}}`)
	p.waitJob(t, failed.ID, "FAILED", status("FAILED"))
	canceled = p.submit(t, `{"report":"demo","params":{"rows":50000,"seconds":600}}`)
	p.waitJob(t, canceled.ID, "PROCESSING", status("PROCESSING"))
	resp, err := http.Post(p.url+"/api/v1/exports/"+canceled.ID+"/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %s", resp.Status)
	}
	p.waitJob(t, canceled.ID, "CANCELED", status("CANCELED"))
	running = p.submit(t, `{"report":"demo","params":{"rows":50000,"seconds":600}}`)
	p.waitJob(t, running.ID, "PROCESSING with progress", func(j client.Job) bool { return j.Status == "PROCESSING" && j.Progress.Rows > 0 })
	return ok, failed, canceled, running
}

// makeDue sets schedule id of the stopped server's data directory due a minute ago, so
// that the server started next fires it at once.
func makeDue(t *testing.T, data, id string) {
	t.Helper()
	withStore(t, data, func(st *store.Store) {
		s, err := st.GetSchedule(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		s.NextRunAt = time.Now().Add(-time.Minute).Truncate(time.Minute)
		if _, err := st.UpdateSchedule(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	})
}
