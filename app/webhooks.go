package app

import (
	"errors"
	"log/slog"
	"net/http"

	"sheetq/jobs/webhook"
	"sheetq/store"
)

// webhookRequest is the optional "webhook" member of POST /api/v1/exports.
type webhookRequest struct {
	URL string `json:"url"`
}

// openWebhooks builds the webhook delivery kind from the config file's [webhooks]
// table. Without a secret it is still registered, so that deliveries queued under an
// earlier config fail with a clear error instead of an unknown kind.
func openWebhooks(settings webhook.Settings, log *slog.Logger, st *store.Store) (*webhook.Handler, error) {
	wc, err := settings.Config()
	if err != nil {
		return nil, err
	}
	wc.Recorder, wc.Logger = st, log
	return webhook.New(wc)
}

// checkWebhook validates a request's webhook at acceptance and returns its URL; when it
// is refused it answers the problem and returns ok=false.
func (s *server) checkWebhook(w http.ResponseWriter, r *http.Request, req *webhookRequest) (url string, ok bool) {
	if !s.webhooks.Configured() {
		writeProblem(w, http.StatusUnprocessableEntity, "webhooks_not_configured",
			"this server sends no webhooks: set [webhooks] secret in its config file")
		return "", false
	}
	err := s.webhooks.CheckURL(r.Context(), req.URL)
	switch {
	case err == nil:
		return req.URL, true
	case errors.Is(err, webhook.ErrNotAllowed):
		writeProblem(w, http.StatusUnprocessableEntity, "webhook_not_allowed", err.Error()+
			" (set [webhooks] allow_private = true to allow private addresses)")
	default:
		writeProblem(w, http.StatusUnprocessableEntity, "invalid_webhook", err.Error())
	}
	return "", false
}
