package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"sheetq/internal/durable"

	"sheetq/app/schedules"
	"sheetq/jobs/deliver"
)

// ScheduleConfig is one [[schedules]] table of the config file: a schedule kept in git
// with the rest of the configuration.
//
//	[[schedules]]
//	id = "monthly-orders"
//	report = "orders"
//	cron = "0 6 1 * *"
//	timezone = "Europe/Berlin"
//	params = { from = "month_start(-1)", to = "month_start(0)" }
//	deliver = [{ type = "email", to = ["ann@example.com"] }]
type ScheduleConfig struct {
	ID       string           `toml:"id"`
	Report   string           `toml:"report"`
	Params   map[string]any   `toml:"params"`
	Format   string           `toml:"format"`
	BOM      bool             `toml:"bom"`
	Cron     string           `toml:"cron"`
	TimeZone string           `toml:"timezone"`
	Deliver  []deliver.Target `toml:"deliver"`
	Paused   bool             `toml:"paused"`
}

// declareSchedules makes the schedules table match the config file's [[schedules]]
// (schedules.Service.Declare): at start, before any firing. A schedule the file
// declares wrongly refuses the start, naming it and the field.
func (a *App) declareSchedules(ctx context.Context, fc FileConfig) error {
	decl := make([]schedules.Declared, 0, len(fc.Schedules))
	for i, sc := range fc.Schedules {
		var targets json.RawMessage
		if len(sc.Deliver) > 0 {
			b, err := json.Marshal(sc.Deliver)
			if err != nil {
				return fc.Errorf("[[schedules]] %d (%q): deliver: %w", i+1, sc.ID, err)
			}
			targets = b
		}
		decl = append(decl, schedules.Declared{ID: sc.ID, Input: schedules.Input{Report: sc.Report, Params: sc.Params,
			Format: sc.Format, BOM: sc.BOM, Cron: sc.Cron, TimeZone: sc.TimeZone, Deliver: targets, Paused: sc.Paused}})
	}
	mine, err := a.declaredBefore()
	if err != nil {
		return err
	}
	created, updated, deleted, err := a.sched.Declare(ctx, decl, mine)
	if err != nil {
		return fc.Errorf("[[schedules]]: %w", err)
	}
	if created+updated+deleted > 0 {
		a.log.InfoContext(ctx, "schedules from the config file", "created", created, "updated", updated, "deleted", deleted)
	}
	ids := make([]string, 0, len(decl))
	for _, d := range decl {
		ids = append(ids, d.ID)
	}
	return a.rememberDeclared(ids)
}

// declaredFile is where a node remembers the ids its config file declared at its last
// start, in its own data directory: a schedule is deleted for missing from the file only
// if this node declared it (issue 36: a node of a cluster whose file lacked an entry
// deleted the schedule another node's file declared).
func (a *App) declaredFile() string { return filepath.Join(a.dir.Root, "declared-schedules.json") }

// declaredBefore says which declared schedules this node may delete: those its file
// declared at its last start. Before the first start that remembered them, a node on
// its own SQLite file may delete any (no other node declares into it), and a node on a
// shared store none.
func (a *App) declaredBefore() (func(id string) bool, error) {
	b, err := os.ReadFile(a.declaredFile())
	if errors.Is(err, fs.ErrNotExist) {
		single := !a.shared
		return func(string) bool { return single }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the schedules this node declared: %w", err)
	}
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		// Damaged: deleting nothing is the safe reading; the next start rewrites it.
		a.log.Warn("the list of schedules this node declared is damaged; no declared schedule is deleted at this start",
			"file", a.declaredFile(), "err", err)
		return func(string) bool { return false }, nil
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return func(id string) bool { return set[id] }, nil
}

// rememberDeclared writes the ids the config file declares now, for the next start.
func (a *App) rememberDeclared(ids []string) error {
	slices.Sort(ids)
	b, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(a.declaredFile(), b, 0o600); err != nil {
		return fmt.Errorf("remember the schedules this node declared: %w", err)
	}
	return nil
}
