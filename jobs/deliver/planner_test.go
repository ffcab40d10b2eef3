package deliver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"sheetq/store"
)

// A firing of a schedule saved before a bound was added (60 recipients in all, over the
// 50 that saving allows now; a webhook URL longer than 2,048 characters) still gets a
// delivery per target: the planner does not apply saving's checks, so no target is
// dropped, and none of the others with it, without a word.
func TestPlannerKeepsTargetsSavedBeforeABound(t *testing.T) {
	var hooked []string
	p := Planner{Webhook: func(j store.Job) ([]store.FollowUp, error) {
		hooked = append(hooked, j.NotifyURL)
		return []store.FollowUp{{ID: "wh", Kind: "webhook"}}, nil
	}}
	addrs := func(from int) string {
		var out []string
		for i := range 30 {
			out = append(out, fmt.Sprintf("%q", fmt.Sprintf("p%d@example.com", from+i)))
		}
		return strings.Join(out, ",")
	}
	long := "https://hooks.example.com/" + strings.Repeat("x", 3000)
	targets := `[{"type":"email","to":[` + addrs(0) + `]},{"type":"email","to":[` + addrs(30) + `]},` +
		`{"type":"webhook","url":"` + long + `"},{"type":"folder","path":"/srv/reports"}]`
	if _, err := ParseTargets(json.RawMessage(targets)); err == nil {
		t.Fatal("saving's checks accept the list; the test needs one they refuse")
	}
	fus, err := p.FollowUps(exportJob(t, store.StatusSucceeded, targets))
	if err != nil || len(fus) != 4 {
		t.Fatalf("FollowUps = %d follow-ups, %v; want one per target (4)", len(fus), err)
	}
	if len(hooked) != 1 || hooked[0] != long {
		t.Errorf("the webhook target reached the hook as %d URLs", len(hooked))
	}
}
