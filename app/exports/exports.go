// Package exports is what the JSON API and the pages share about exports, so that each
// rule has one copy: validating a request, accepting it at most once per idempotency
// key, loading an export by id, running it again, list cursors, and when to look again
// (ARCHITECTURE.md, "Data flow of one export").
package exports

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// MaxBody bounds a request body, the API's and the form's: an export request is a
// report id and a few params.
const MaxBody = 64 << 10

// Deduper counts requests answered with their existing job (*metrics.Metrics; a nil
// one counts nothing).
type Deduper interface{ Dedup() }

// Service accepts, loads and retries exports for the API and the pages.
type Service struct {
	Store  Store
	Engine *jobs.Engine
	Kind   *export.Kind
	// MaxAttempts is each new or retried export's attempt budget.
	MaxAttempts int
	// Metrics counts idempotent replays.
	Metrics Deduper
	// Policy says who may run a report without an access line (access.go).
	Policy access.Policy
	// Audit records who requested, downloaded, canceled, retried and deleted which
	// export (Record); nil records nothing.
	Audit *audit.Log
}

// Validate checks a request for report with params, its file written as file asks
// (format, BOM, csv formulas: export.Args.WithFile), for the API and the form alike,
// and returns the canonical args, or the problem to show when the request is wrong.
func (s *Service) Validate(ctx context.Context, report string, params map[string]any, file export.FileOptions) (export.Args, *problem.Problem) {
	return s.ValidateAs(access.From(ctx), report, params, file)
}

// ValidateAs is Validate for who, which may not be the request's identity: a schedule's
// owner at a firing. A report who may not run is unknown; its from=person.<attr> parameters take
// who's attributes.
func (s *Service) ValidateAs(who access.Who, report string, params map[string]any, file export.FileOptions) (export.Args, *problem.Problem) {
	var args export.Args
	rep, err := s.Kind.Report(report)
	if err == nil && !s.Policy.CanRun(who, rep.Access) {
		err = fmt.Errorf("%w: %q", export.ErrUnknownReport, report)
	}
	if err == nil {
		args, err = s.Kind.ValidateAs(report, params, who.Attr)
	}
	if p := attrError(err); p != nil {
		return args, p
	}
	if err == nil {
		if args, err = args.WithFile(file); err != nil {
			return args, problem.New(http.StatusUnprocessableEntity, "invalid_format", err.Error())
		}
		if args.EncryptRequired() && args.Format == export.FormatCSV {
			// A csv file has no encryption; written, it would be a plain copy on
			// the server that could only be refused.
			p := problem.New(http.StatusUnprocessableEntity, "encryption_required",
				"report "+strconv.Quote(report)+" hands out its files only encrypted with a password, which a csv file cannot be: ask for xlsx")
			p.Param = "format"
			return args, p
		}
		return args, nil
	}
	p := problem.New(http.StatusUnprocessableEntity, "invalid_request", err.Error())
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

// Enqueue stores a validated export durably, at most once per idempotency key (key ""
// for none), for the API and the form alike. existed is true when the key already had
// this job; a key reused for another request is a *problem.Problem naming its job.
func (s *Service) Enqueue(ctx context.Context, args export.Args, webhookURL, key string) (job store.Job, existed bool, err error) {
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return store.Job{}, false, err
	}
	nj := store.NewJob{Kind: export.Name, Args: argsJSON, MaxAttempts: s.MaxAttempts, NotifyURL: webhookURL,
		CreatedBy: middleware.Principal(ctx), Queue: args.Queue()}
	if key != "" {
		// The canonical form of the validated request: map keys are sorted by
		// encoding/json, and params are normalised, so equal requests hash equal.
		// The spec snapshot is left out: a report edited between two retries of one
		// request is still the same request.
		// The webhook is part of the request; left out when absent, so hashes of requests
		// without one are unchanged. So are the file's format, BOM and csv formulas
		// (Args.Format is "" for xlsx, Args.CSVFormulas "" for neutralised): the same key
		// asking for csv instead, or for kept formulas, is another request.
		canon, err := json.Marshal(struct {
			export.Args
			Webhook string `json:"webhook,omitempty"`
		}{export.Args{Report: args.Report, Params: args.Params, Format: args.Format, BOM: args.BOM, CSVFormulas: args.CSVFormulas}, webhookURL})
		if err != nil {
			return store.Job{}, false, err
		}
		sum := sha256.Sum256(canon)
		// In the clients' namespace: a key that looks like a schedule's firing key
		// ("schedule:<id>:<time>") is still only this client's.
		nj.IdempotencyKey, nj.RequestHash = store.ClientKey(ownKey(ctx, key)), hex.EncodeToString(sum[:])
	}
	if s.Audit != nil {
		// The request's entry goes in the job's own transaction (group-committed with
		// it): the export exists if and only if its entry does. A replay of an
		// Idempotency-Key, answered with the export it made first, adds none.
		detail := "format " + args.FileFormat()
		if args.KeepsFormulas() {
			detail += ", formulas kept" // a file that may run formulas: worth finding in the log
		}
		nj.Audit = audit.EntryOf(ctx, audit.ExportRequested, audit.Entry{Report: args.Report, Detail: detail})
	}
	job, existed, err = s.Engine.Enqueue(ctx, nj)
	if errors.Is(err, store.ErrAuditNotWritten) {
		return store.Job{}, false, Unaudited(err)
	}
	if errors.Is(err, store.ErrIdempotencyMismatch) {
		p := problem.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"this Idempotency-Key was used for a different request (job "+job.ID+")")
		p.Job = job.ID
		return job, true, p
	}
	if err != nil {
		return store.Job{}, false, err
	}
	if existed && s.Metrics != nil {
		s.Metrics.Dedup()
	}
	return job, existed, nil
}

// ownKey is a client's idempotency key in its sender's namespace: a member's keys are
// theirs alone, so that another member sending the same key is not answered with their
// export. Admins (and the local user) keep the one namespace keys had before people
// existed, in which an admin may see every export anyway; a member's carries the
// length of their name, so that no name and key can pass for another's.
func ownKey(ctx context.Context, key string) string {
	who := access.From(ctx)
	if who.IsAdmin() {
		return key
	}
	return "member:" + strconv.Itoa(len(who.Name)) + ":" + who.Name + ":" + key
}

// Load fetches export id; a job of another kind (a webhook delivery) is no export and
// gives store.ErrNotFound too.
func (s *Service) Load(ctx context.Context, id string) (store.Job, error) {
	job, err := s.Store.Get(ctx, id)
	if err == nil && (job.Kind != export.Name || !s.Visible(ctx, job)) {
		err = store.ErrNotFound
	}
	return job, err
}

// Retry puts a FAILED or CANCELED export back in the queue with a fresh attempt budget
// (MaxAttempts), keeping its history, for the API and the job page alike.
func (s *Service) Retry(ctx context.Context, id string) (store.Job, error) {
	return s.Engine.Retry(ctx, id, s.MaxAttempts)
}

// IdempotencyKey reads the Idempotency-Key header, bare or as a structured-field string
// ("..."). ok is false for a malformed key; an absent header gives "", true.
func IdempotencyKey(h http.Header) (string, bool) {
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

// RetryAfter suggests when to poll again, in seconds: soon for a running or queued job,
// at its next attempt for one waiting out a retry backoff.
func (s *Service) RetryAfter(j store.Job) int {
	if j.Status == store.StatusPending && j.Attempt > 0 {
		if d := int(math.Ceil(j.RunAt.Sub(s.Store.Now()).Seconds())); d > 2 {
			return min(d, 60)
		}
	}
	return 2
}

// EncodeCursor is the cursor after j in a listing: its Seq, encoded so clients treat it
// as opaque.
func EncodeCursor(j store.Job) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(j.Seq, 10)))
}

// CursorSeq decodes a cursor into ListOptions.Before; ok is false for one this server did
// not give out. Cursors given out before listings went by insertion order hold
// "<created ms>.<job id>"; one of those resumes after its job while that job exists.
func (s *Service) CursorSeq(ctx context.Context, c string) (seq int64, ok bool, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false, nil
	}
	head, id, legacy := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(head, 10, 64)
	switch {
	case err != nil:
		return 0, false, nil
	case !legacy:
		return n, n > 0, nil
	case id == "":
		return 0, false, nil
	}
	j, err := s.Store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	return j.Seq, err == nil, err
}
