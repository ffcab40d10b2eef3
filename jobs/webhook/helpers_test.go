package webhook_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// The tests run deliveries' creation on a real, migrated store with the Announcer as its
// follow-up hook, with the store tests' helpers (store/storetest).

// announcer is the hook app.Run gives the store, with base as the public URL.
func announcer(base string) store.FollowUpFunc {
	return webhook.Announcer{BaseURL: base, Describe: export.JobJSON}.FollowUps
}

// openStore opens a migrated store on a fresh file in t.TempDir, announcing final
// states to webhooks unless opts names another hook, and closes it at cleanup.
func openStore(t testing.TB, opts sqlite.Options) (*store.Store, string) {
	t.Helper()
	if opts.FollowUps == nil {
		opts.FollowUps = announcer("")
	}
	path := filepath.Join(t.TempDir(), "sheetq.db")
	return storetest.Open(t, path, opts), path
}

var (
	newClock  = storetest.NewClock
	rawDB     = storetest.RawDB
	enqueue   = storetest.Enqueue
	claim     = storetest.Claim
	get       = storetest.Get
	events    = storetest.Events
	eventData = storetest.EventData
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attemptEvent is the timeline event a delivery attempt is recorded as.
func attemptEvent(a webhook.Attempt) string {
	if a.Delivered {
		return webhook.EventDelivered
	}
	return webhook.EventFailed
}
