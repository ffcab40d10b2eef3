package api

import (
	"errors"
	"net/http"

	"sheetq/app/problem"
	"sheetq/jobs/webhook"
)

// webhookRequest is the optional "webhook" member of POST /api/v1/exports.
type webhookRequest struct {
	URL string `json:"url"`
}

// checkWebhook validates a request's webhook at acceptance and returns its URL, or the
// problem that refuses it.
func (a *API) checkWebhook(r *http.Request, req *webhookRequest) (url string, err error) {
	if !a.cfg.Webhooks.Configured() {
		return "", problem.New(http.StatusUnprocessableEntity, "webhooks_not_configured",
			"this server sends no webhooks: set [webhooks] secret in its config file")
	}
	err = a.cfg.Webhooks.CheckURL(r.Context(), req.URL)
	switch {
	case err == nil:
		return req.URL, nil
	case errors.Is(err, webhook.ErrNotAllowed):
		return "", problem.New(http.StatusUnprocessableEntity, "webhook_not_allowed", err.Error()+
			" (set [webhooks] allow_private = true to allow private addresses)")
	}
	return "", problem.New(http.StatusUnprocessableEntity, "invalid_webhook", err.Error())
}
