package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// Migration 0012 on a store an earlier version wrote (issue 36): a client's key, and
// one that looks like a firing's but whose job names no schedule, move under "client:";
// a real firing's key stays, so the schedule's firings are still found and not fired
// again. The earlier version is played by undoing the migration's record and writing
// keys as that version did, then opening the store again.
func TestMigrationMovesClientKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	st := openAt(t, path, sqlite.Options{})
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	firingArgs, _ := json.Marshal(map[string]any{"report": "demo", "schedule_id": "sch1", "scheduled_for": at})
	firing := enqueue(t, st, store.NewJob{Args: firingArgs, IdempotencyKey: store.FiringKey("sch1", at), RequestHash: "h"})
	client := enqueue(t, st, store.NewJob{IdempotencyKey: "4f1c-client", RequestHash: "h"})
	squatter := enqueue(t, st, store.NewJob{IdempotencyKey: store.FiringKey("sch1", at.Add(time.Hour)), RequestHash: "h"})
	// Already in the client namespace under the earlier version: a client that happened
	// to send "client:x" must keep that key too, distinct from one that sent "x".
	prefixed := enqueue(t, st, store.NewJob{IdempotencyKey: "client:x", RequestHash: "h"})
	plain := enqueue(t, st, store.NewJob{IdempotencyKey: "x", RequestHash: "h"})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = 12`); err != nil {
		t.Fatal(err)
	}
	st = openAt(t, path, sqlite.Options{})
	for id, want := range map[string]string{
		firing.ID:   store.FiringKey("sch1", at),
		client.ID:   store.ClientKey("4f1c-client"),
		squatter.ID: store.ClientKey(store.FiringKey("sch1", at.Add(time.Hour))),
		prefixed.ID: store.ClientKey("client:x"),
		plain.ID:    store.ClientKey("x"),
	} {
		if got := get(t, st, id).IdempotencyKey; got != want {
			t.Errorf("job %s: key %q after the migration, want %q", id, got, want)
		}
	}
	if fs, err := st.ScheduleFirings(ctx, "sch1", 10); err != nil || len(fs) != 1 || fs[0].ID != firing.ID {
		t.Errorf("the schedule's firings after the migration: %d, %v; want its one firing", len(fs), err)
	}
}
