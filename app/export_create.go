package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"sheetq/jobs/export"
	"sheetq/store"
)

// maxBody bounds a request body; an export request is a report id and a few params.
const maxBody = 64 << 10

type createRequest struct {
	Report  string          `json:"report"`
	Params  map[string]any  `json:"params"`
	Webhook *webhookRequest `json:"webhook,omitempty"`
}

// createExport accepts an export request: validate, store durably, then 202.
func (s *server) createExport(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			writeProblem(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				"send the request body as application/json")
			return
		}
	}
	key, ok := idempotencyKey(r.Header)
	if !ok {
		writeProblem(w, http.StatusBadRequest, "bad_idempotency_key",
			"Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("the request body is larger than %d bytes", maxBody))
			return
		}
		if bodyTimedOut(err) {
			writeBodyTimeout(w, s.bodies.limit())
			return
		}
		writeProblem(w, http.StatusBadRequest, "bad_body", "could not read the request body: "+err.Error())
		return
	}
	// Workers yield the CPU while a request is being accepted, but only once its body is
	// in, and only until its answer is decided: the client's pace must not set theirs, and
	// a client that trickles its body (or reads its answer slowly) would otherwise slow
	// every export for as long as it liked.
	endForeground := s.gate.Foreground()
	defer endForeground()
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, "malformed_json", "the body is not a valid export request: "+err.Error())
		return
	}
	// Not dec.More(): it reports false for a stray '}' or ']' after the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeProblem(w, http.StatusBadRequest, "malformed_json", "the body has data after the JSON object")
		return
	}
	if req.Report == "" {
		writeProblemValue(w, problem{Status: http.StatusUnprocessableEntity, Code: "missing_report",
			Detail: `the body needs "report": the id of a report (see GET /api/v1/reports)`})
		return
	}
	args, prob := s.validateExport(req.Report, req.Params)
	if prob != nil {
		writeProblemValue(w, *prob)
		return
	}
	var webhookURL string
	if req.Webhook != nil {
		if webhookURL, ok = s.checkWebhook(w, r, req.Webhook); !ok {
			return
		}
	}
	job, existed, prob, err := s.enqueueExport(r.Context(), args, webhookURL, key)
	endForeground()
	switch {
	case prob != nil:
		writeProblemValue(w, *prob)
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	if existed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	s.writeJobAnswer(w, job)
}

// validateExport checks a request for report with params, for the API and the form alike,
// and returns the canonical args, or the problem to show when the request is wrong.
func (s *server) validateExport(report string, params map[string]any) (export.Args, *problem) {
	args, err := s.exports.Validate(report, params)
	if err == nil {
		return args, nil
	}
	p := &problem{Status: http.StatusUnprocessableEntity, Code: "invalid_request", Detail: err.Error()}
	var pe *export.ParamError
	switch {
	case errors.As(err, &pe):
		p.Code, p.Detail, p.Param = "invalid_param", pe.Error(), pe.Param
	case errors.Is(err, export.ErrUnknownReport):
		p.Code = "unknown_report"
	case errors.Is(err, export.ErrUnknownSource):
		p.Code = "unknown_source"
	case errors.As(err, new(*export.ParseError)):
		p.Code = "broken_report"
		p.Detail = "report " + strconv.Quote(report) + " cannot be used until its file is fixed: " + err.Error()
	}
	return args, p
}

// enqueueExport stores a validated export durably, at most once per idempotency key
// (key "" for none), for the API and the form alike. existed is true when the key
// already had this job; a key reused for another request gives a problem naming its job.
func (s *server) enqueueExport(ctx context.Context, args export.Args, webhookURL, key string) (job store.Job, existed bool, prob *problem, err error) {
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return store.Job{}, false, nil, err
	}
	nj := store.NewJob{Kind: export.Name, Args: argsJSON, MaxAttempts: s.cfg.MaxAttempts, NotifyURL: webhookURL,
		CreatedBy: principal(ctx)}
	if key != "" {
		// The canonical form of the validated request: map keys are sorted by
		// encoding/json, and params are normalised, so equal requests hash equal.
		// The spec snapshot is left out: a report edited between two retries of one
		// request is still the same request.
		// The webhook is part of the request; left out when absent, so hashes of requests
		// without one are unchanged.
		canon, err := json.Marshal(struct {
			export.Args
			Webhook string `json:"webhook,omitempty"`
		}{export.Args{Report: args.Report, Params: args.Params}, webhookURL})
		if err != nil {
			return store.Job{}, false, nil, err
		}
		sum := sha256.Sum256(canon)
		nj.IdempotencyKey, nj.RequestHash = key, hex.EncodeToString(sum[:])
	}
	job, existed, err = s.engine.Enqueue(ctx, nj)
	if errors.Is(err, store.ErrIdempotencyMismatch) {
		return job, true, &problem{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Detail: "this Idempotency-Key was used for a different request (job " + job.ID + ")", Job: job.ID}, nil
	}
	if err != nil {
		return store.Job{}, false, nil, err
	}
	if existed {
		s.metrics.dedup()
	}
	return job, existed, nil, nil
}

// idempotencyKey reads the Idempotency-Key header, bare or as a structured-field string
// ("..."). ok is false for a malformed key; an absent header gives "", true.
func idempotencyKey(h http.Header) (string, bool) {
	vals := h.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", true
	}
	if len(vals) > 1 {
		return "", false
	}
	k := strings.TrimSpace(vals[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
		if strings.ContainsAny(k, `"\`) {
			return "", false
		}
	}
	if k == "" || len(k) > 255 {
		return "", false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", false
		}
	}
	return k, true
}

// retryAfter suggests when to poll again, in seconds: soon for a running or queued job,
// at its next attempt for one waiting out a retry backoff.
func (s *server) retryAfter(j store.Job) int {
	if j.Status == store.StatusPending && j.Attempt > 0 {
		if d := int(math.Ceil(j.RunAt.Sub(s.store.Now()).Seconds())); d > 2 {
			return min(d, 60)
		}
	}
	return 2
}
