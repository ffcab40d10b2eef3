//go:build !windows

package e2e

import (
	"strings"
	"testing"
)

// The New export form's estimate follows the values: changing the end date of the
// orders report turns "with these parameters" into the runs scaled to the new span,
// without a reload.
func TestBrowserFormsEstimate(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	for range 2 {
		j := p.submit(t, `{"report":"orders","params":{"from":"2025-01-01","to":"2025-02-01"}}`)
		p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	}
	b := newTab(t, p.url)
	b.open("/exports/new?report=orders")
	b.waitVisible(tid("estimate-basis"), stepTimeout)
	if got := b.text(tid("estimate-basis")); got != "Estimated from 2 recent runs with these parameters." {
		t.Errorf("estimate-basis %q", got)
	}
	rows := b.attr(tid("estimate"), "data-rows")
	if rows == "" || rows == "0" {
		t.Fatalf("estimate rows %q", rows)
	}
	b.setMarker()
	setValue := func(name, value string) {
		t.Helper()
		mustEval[bool](b, `(() => { const e = document.querySelector(`+js(tid("param-"+name))+`); e.value = `+js(value)+
			`; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	}
	basisIs := func(want string) string {
		return `(() => { const e = document.querySelector(` + js(tid("estimate-basis")) + `); return !!e && e.textContent.trim() === ` + js(want) + `; })()`
	}
	setValue("to", "2025-03-04")
	b.waitFor("the estimate scaled to 62 days", stepTimeout, basisIs("Estimated from 2 recent runs of this report, scaled to 62 days."), nil)
	if got := b.attr(tid("estimate"), "data-rows"); got == rows {
		t.Errorf("twice the days, the same rows: %s", got)
	}
	setValue("to", "2025-02-01")
	b.waitFor("the estimate back to the same parameters", stepTimeout, basisIs("Estimated from 2 recent runs with these parameters."), nil)
	b.checkMarker("after the estimate changed")
	if got := b.text(tid("estimate-queue")); !strings.Contains(got, "exports queue") {
		t.Errorf("estimate-queue %q", got)
	}
}
