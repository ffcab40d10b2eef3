package app

import (
	"log/slog"

	"sheetq/jobs/webhook"
)

// openWebhooks builds the webhook delivery kind from the config file's [webhooks]
// table, or from override when set (tests). Without a secret it is still registered, so
// that deliveries queued under an earlier config fail with a clear error instead of an
// unknown kind.
func openWebhooks(fc FileConfig, override *webhook.Config, log *slog.Logger, rec webhook.Recorder) (*webhook.Handler, error) {
	settings := fc.Webhooks
	var wc webhook.Config
	if override != nil {
		wc = *override
	} else {
		var err error
		if wc, err = settings.Config(); err != nil {
			return nil, fc.Errorf("%w", err)
		}
	}
	wc.Recorder, wc.Logger = rec, log
	return webhook.New(wc)
}
