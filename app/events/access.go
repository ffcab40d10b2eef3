package events

import (
	"context"
	"sheetq/app/access"
	"sheetq/jobs/export"
	"sheetq/store"
)

// streamFilter keeps a member's stream to the exports they may see (ARCHITECTURE.md,
// "People and permissions"): an event carries its job's owner and report, which
// Config.Visible checks; a message without them (progress, a deletion) goes only to a
// stream that has seen its job: the one it follows, an unfinished one of theirs when
// the stream opened, or one an event showed it since.
type streamFilter struct {
	ctx     context.Context
	all     bool
	visible func(ctx context.Context, owner, report string) bool
	jobs    map[string]bool
}

// newFilter is the filter of a stream whose request's identity ctx carries: an admin's
// (or any stream when the hub has no Visible) lets everything through.
func (h *Hub) newFilter(ctx context.Context) *streamFilter {
	return &streamFilter{ctx: ctx, all: h.cfg.Visible == nil || access.From(ctx).IsAdmin(),
		visible: h.cfg.Visible, jobs: map[string]bool{}}
}

// allowJob reports whether the stream may see j, and remembers it if so.
func (f *streamFilter) allowJob(j store.Job) bool {
	if f.all {
		return true
	}
	if !f.visible(f.ctx, j.CreatedBy, export.ReportOf(j)) {
		return false
	}
	f.jobs[j.ID] = true
	return true
}

// loadUnfinished remembers the stream's unfinished jobs, whose progress it shows.
func (f *streamFilter) loadUnfinished(ctx context.Context, st Log) error {
	if f.all {
		return nil
	}
	list, err := st.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, j := range list {
		f.allowJob(j)
	}
	return nil
}

// allow reports whether m may go to the stream.
func (f *streamFilter) allow(m sseMessage) bool {
	switch {
	case f.all:
		return true
	case m.known:
		ok := f.visible(f.ctx, m.owner, m.report)
		if ok {
			f.jobs[m.job] = true
		}
		return ok
	}
	return f.jobs[m.job]
}
