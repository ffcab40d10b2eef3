package pg_test

import (
	"encoding/json"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/pg"
)

// Migration 0010 on a store an earlier version wrote (issue 36), as the SQLite store's
// 0012 (store.TestMigrationMovesClientKeys): clients' keys, and one that looks like a
// firing's whose job names no schedule, move under "client:"; a real firing's stays.
func TestMigrationMovesClientKeys(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	put := func(key string, args any) store.Job {
		t.Helper()
		b, _ := json.Marshal(args)
		j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: b, IdempotencyKey: key, RequestHash: "h"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	firing := put(store.FiringKey("sch1", at), map[string]any{"report": "demo", "schedule_id": "sch1"})
	client := put("4f1c-client", map[string]any{"report": "demo"})
	squatter := put(store.FiringKey("sch1", at.Add(time.Hour)), map[string]any{"report": "demo"})
	prefixed := put("client:x", map[string]any{"report": "demo"})
	plain := put("x", map[string]any{"report": "demo"})
	conn := rawConn(t, dsn)
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = 10`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openStore(t, dsn, pg.Options{})
	for id, want := range map[string]string{
		firing.ID:   store.FiringKey("sch1", at),
		client.ID:   store.ClientKey("4f1c-client"),
		squatter.ID: store.ClientKey(store.FiringKey("sch1", at.Add(time.Hour))),
		prefixed.ID: store.ClientKey("client:x"),
		plain.ID:    store.ClientKey("x"),
	} {
		j, err := st.Get(ctx, id)
		if err != nil || j.IdempotencyKey != want {
			t.Errorf("job %s: key %q (%v) after the migration, want %q", id, j.IdempotencyKey, err, want)
		}
	}
	if fs, err := st.ScheduleFirings(ctx, "sch1", 10); err != nil || len(fs) != 1 || fs[0].ID != firing.ID {
		t.Errorf("the schedule's firings after the migration: %d, %v; want its one firing", len(fs), err)
	}
}
