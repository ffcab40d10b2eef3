package api

import (
	"encoding/csv"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/store"
)

// AuditCSVMax is the most entries one csv download of the audit log holds: the newest
// that match its filters.
const AuditCSVMax = 100_000

// auditCSVHeader is the csv download's header row, the JSON's field names.
var auditCSVHeader = []string{"at", "actor", "action", "job", "report", "ip", "detail"}

// getAudit answers GET /api/v1/audit, for admins only: a page of the audit log, newest
// first, filtered by ?actor=, ?action= and ?job=, with ?limit= and the opaque ?cursor=
// of the page before; with ?format=csv (or Accept: text/csv, without ?format=) the
// whole filtered log as csv, the newest AuditCSVMax entries at most.
func (a *API) getAudit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if who := access.From(ctx); !who.IsAdmin() {
		// The refusal goes on the record as every 403 does (problem.Reporter.Refused).
		return problem.New(http.StatusForbidden, "forbidden", "the audit log is for admins; "+who.Name+" is a "+string(who.Role))
	}
	q, err := queryOnce(r.URL.RawQuery, "actor", "action", "job", "limit", "cursor", "format")
	if err != nil {
		return err
	}
	f := store.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action"), Job: q.Get("job"), Limit: 50}
	if f.Action != "" && !audit.IsAction(f.Action) {
		return problem.New(http.StatusBadRequest, "bad_action", "action must be one of "+strings.Join(audit.Actions, ", "))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return problem.New(http.StatusBadRequest, "bad_limit", "limit must be a whole number from 1 to 1000")
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, ok := audit.ParseCursor(v)
		if !ok {
			return problem.New(http.StatusBadRequest, "bad_cursor", "cursor is not one this server gave out")
		}
		f.Before = seq
	}
	var asCSV bool
	switch format := q.Get("format"); format {
	case "csv":
		asCSV = true
	case "json":
	case "":
		asCSV = acceptsCSV(r.Header.Values("Accept"))
	default:
		return problem.New(http.StatusBadRequest, "bad_format", "format must be json or csv")
	}
	if asCSV {
		return a.auditCSV(w, r, f)
	}
	es, err := a.cfg.Audit.Entries(ctx, f)
	if err != nil {
		return err
	}
	out := apiv1.AuditPage{Entries: make([]apiv1.AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, auditJSON(e))
	}
	if len(es) == f.Limit {
		out.NextCursor = audit.EncodeCursor(es[len(es)-1].Seq)
	}
	problem.WriteJSON(w, http.StatusOK, out)
	return nil
}

func auditJSON(e store.AuditEntry) apiv1.AuditEntry {
	return apiv1.AuditEntry{At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Job: e.Job, Report: e.Report, IP: e.IP, Detail: e.Detail}
}

// auditCSV streams the entries f selects, every page of them up to AuditCSVMax, as csv
// with a header row. The first page is read before anything is written, so that a
// database fault is still a problem+json; a fault on a later page aborts the response,
// so that a client never takes a cut file for the whole log.
func (a *API) auditCSV(w http.ResponseWriter, r *http.Request, f store.AuditFilter) error {
	ctx := r.Context()
	f.Limit = 1000
	page, err := a.cfg.Audit.Entries(ctx, f)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="sheetq-audit.csv"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write(auditCSVHeader)
	written := 0
	for {
		for _, e := range page {
			if written == AuditCSVMax {
				break
			}
			_ = cw.Write(auditCSVRow(e))
			written++
		}
		if len(page) < f.Limit || written == AuditCSVMax {
			break
		}
		f.Before = page[len(page)-1].Seq
		if page, err = a.cfg.Audit.Entries(ctx, f); err != nil {
			if ctx.Err() == nil {
				a.cfg.Log.ErrorContext(ctx, "audit csv cut short", "rows", written, "err", err)
			}
			panic(http.ErrAbortHandler)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil && ctx.Err() == nil {
		a.cfg.Log.WarnContext(ctx, "write audit csv", "err", err)
	}
	return nil
}

// auditCSVRow is an entry's csv row, each text cell formula-safe.
func auditCSVRow(e store.AuditEntry) []string {
	return []string{e.At.UTC().Format(time.RFC3339Nano), safeCell(e.Actor), safeCell(e.Action), safeCell(e.Job),
		safeCell(e.Report), safeCell(e.IP), safeCell(e.Detail)}
}

// safeCell keeps a spreadsheet from running a cell as a formula (CSV injection, OWASP):
// a text that starts with =, +, -, @, a tab or a carriage return gets a leading '.
func safeCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// acceptsCSV reports whether an Accept header asks for text/csv (and does not refuse it
// with q=0).
func acceptsCSV(accept []string) bool {
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != "text/csv" {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); params["q"] == "" || err == nil && q > 0 {
				return true
			}
		}
	}
	return false
}

// queryOnce parses a query string, refusing what url.Values.Get would quietly drop or
// pick from (a bad escape, a parameter of names given twice) with 400 bad_query, as
// the exports' listing does (listQuery).
func queryOnce(raw string, names ...string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, problem.New(http.StatusBadRequest, "bad_query",
			"the query string cannot be read ("+err.Error()+"); escape its values with percent-encoding")
	}
	for _, name := range names {
		if len(q[name]) > 1 {
			return nil, problem.New(http.StatusBadRequest, "bad_query",
				name+" is given "+strconv.Itoa(len(q[name]))+" times; give it once")
		}
	}
	return q, nil
}
