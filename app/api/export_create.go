package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"sheetq/app/exports"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/jobs/export"
)

type createRequest struct {
	Report string         `json:"report"`
	Params map[string]any `json:"params"`
	// Format is the file's: "xlsx" (or absent) or "csv"; BOM, with csv only, starts
	// the file with a UTF-8 byte order mark for Excel; CSVFormulas is "neutralise" (or
	// absent) or, with csv only, "keep" (export.Args.CSVFormulas).
	Format      string          `json:"format"`
	BOM         bool            `json:"bom"`
	CSVFormulas string          `json:"csv_formulas"`
	Webhook     *webhookRequest `json:"webhook,omitempty"`
}

// createExport accepts an export request: validate, store durably, then 202.
func (a *API) createExport(w http.ResponseWriter, r *http.Request) error {
	if err := checkJSONType(r); err != nil {
		return err
	}
	key, ok := exports.IdempotencyKey(r.Header)
	if !ok {
		return problem.New(http.StatusBadRequest, "bad_idempotency_key",
			"Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string")
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	// Workers yield the CPU while a request is being accepted, but only once its body is
	// in, and only until its answer is decided: the client's pace must not set theirs, and
	// a client that trickles its body (or reads its answer slowly) would otherwise slow
	// every export for as long as it liked.
	endForeground := a.cfg.Gate.Foreground()
	defer endForeground()
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return problem.New(http.StatusBadRequest, "malformed_json", "the body is not a valid export request: "+err.Error())
	}
	// Not dec.More(): it reports false for a stray '}' or ']' after the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problem.New(http.StatusBadRequest, "malformed_json", "the body has data after the JSON object")
	}
	// encoding/json keeps the last of a repeated key without a word, as for a schedule.
	if path := duplicateKey(body); path != "" {
		return problem.New(http.StatusBadRequest, "malformed_json",
			"the body gives "+strconv.Quote(path)+" more than once; give each field once")
	}
	if req.Report == "" {
		return problem.New(http.StatusUnprocessableEntity, "missing_report",
			`the body needs "report": the id of a report (see GET /api/v1/reports)`)
	}
	args, prob := a.exports.Validate(r.Context(), req.Report, req.Params,
		export.FileOptions{Format: req.Format, BOM: req.BOM, CSVFormulas: req.CSVFormulas})
	if prob != nil {
		return prob
	}
	var webhookURL string
	if req.Webhook != nil {
		if webhookURL, err = a.checkWebhook(r, req.Webhook); err != nil {
			return err
		}
	}
	job, existed, err := a.exports.Enqueue(r.Context(), args, webhookURL, key)
	endForeground()
	if err != nil {
		return err
	}
	if existed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	a.writeJobAnswer(w, job)
	return nil
}

// checkJSONType refuses a request body declared as anything but JSON, or as compressed
// (the server reads no Content-Encoding; RFC 9110, section 15.5.16); a body without a
// Content-Type is read as JSON.
func checkJSONType(r *http.Request) error {
	for _, ce := range r.Header.Values("Content-Encoding") {
		if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
			return problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
				"send the request body uncompressed, without Content-Encoding "+strconv.Quote(ce)).With("Accept-Encoding", "identity")
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
				"send the request body as application/json")
		}
	}
	return nil
}

// readBody reads a request body of at most exports.MaxBody bytes, or returns the problem
// to answer: too large, too slow to arrive, cut off, or not UTF-8.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, exports.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, problem.New(http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("the request body is larger than %d bytes", exports.MaxBody))
		}
		if middleware.BodyTimedOut(err) {
			return nil, a.cfg.Middleware.BodyTimeout()
		}
		return nil, problem.New(http.StatusBadRequest, "bad_body", "could not read the request body: "+err.Error())
	}
	// encoding/json turns bytes that are not UTF-8 into U+FFFD without a word: a body
	// sent as Latin-1 would be accepted with "M\ufffdller" for "Müller". JSON is UTF-8
	// (RFC 8259, section 8.1).
	if !utf8.Valid(body) {
		return nil, problem.New(http.StatusBadRequest, "malformed_json",
			"the request body is not valid UTF-8: send JSON encoded as UTF-8")
	}
	return body, nil
}
