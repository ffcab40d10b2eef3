package app

import (
	"context"
	"encoding/json"

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
	created, updated, deleted, err := a.sched.Declare(ctx, decl)
	if err != nil {
		return fc.Errorf("[[schedules]]: %w", err)
	}
	if created+updated+deleted > 0 {
		a.log.InfoContext(ctx, "schedules from the config file", "created", created, "updated", updated, "deleted", deleted)
	}
	return nil
}
