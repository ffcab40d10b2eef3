package app

import (
	"context"
	"time"

	"sheetq/app/audit"
)

// pruneAudit runs the audit log's retention (audit.Log.Prune, --audit-keep) in the
// background until the returned stop is called, which waits for it.
func pruneAudit(ctx context.Context, l *audit.Log, keep time.Duration) (stop func()) {
	// Stop ends it, not the start's context: the other services outlive that too.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Prune(ctx, keep)
	}()
	return func() {
		cancel()
		<-done
	}
}
