package export

import (
	"encoding/json"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/jobs"
	"sheetq/store"
)

// FileExt is the extension of an xlsx export's file, published and downloaded (CSVExt
// is a csv one's).
const FileExt = ".xlsx"

// The engine asks the kind for its file's name (ARCHITECTURE.md, "Data directory").
var _ jobs.FileNamer = (*Kind)(nil)

// FileName is the name of job id's published file in the exports directory, with the
// extension of the format in its args; it makes *Kind a jobs.FileNamer, so the engine
// publishes and recovers under this name.
func (*Kind) FileName(id string, args json.RawMessage) string { return id + formatOf(args).FileExt() }

// JobJSON is an export job as API v1 shows it, the one shape the API, the pages' data,
// the event stream and the webhook payload share (ARCHITECTURE.md, "Public contracts").
// base, when set (scheme://host), makes download_url absolute: a webhook's receiver has
// no other way to know where the server is; the API leaves it empty.
func JobJSON(j store.Job, base string) apiv1.Job {
	args := shownArgs(j.Args)
	out := apiv1.Job{
		ID: j.ID, Status: string(j.Status), Report: args.Report, CreatedBy: j.CreatedBy, Queue: j.Queue, Params: args.Params,
		Format: args.FileFormat(), BOM: args.BOM, ScheduleID: args.ScheduleID, ScheduledFor: args.ScheduledFor,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Progress:  apiv1.Progress{Rows: j.ProgressRows},
		CreatedAt: timePtr(j.CreatedAt), StartedAt: timePtr(j.StartedAt),
		HeartbeatAt: timePtr(j.HeartbeatAt), FinishedAt: timePtr(j.FinishedAt),
	}
	if out.Params == nil {
		out.Params = map[string]any{}
	}
	if args.KeepsFormulas() {
		out.CSVFormulas = CSVKeep
	}
	if j.ProgressTotal >= 0 {
		total := j.ProgressTotal
		out.Progress.TotalRows = &total
	}
	if j.Status == store.StatusPending {
		// What a PENDING job's row holds is left over from an attempt that failed or was
		// killed; the next claim starts from 0. Shown, it reads as progress of a job
		// that is not running ("62,503/100,000" while it waits).
		out.Progress = apiv1.Progress{}
	}
	if j.Status == store.StatusPending && j.Attempt > 0 {
		out.NextAttemptAt = timePtr(j.RunAt)
	}
	// A retrying job keeps its last error visible, so a client can say why it waits.
	if j.ErrorCode != "" && j.Status != store.StatusSucceeded {
		out.Error = &apiv1.Error{Code: j.ErrorCode, Message: j.ErrorMessage}
	}
	out.Warnings = j.Warnings
	out.CancelRequested = j.CancelRequested && j.Status == store.StatusProcessing
	out.EncryptRequired = args.EncryptRequired()
	if j.Status == store.StatusSucceeded && j.FileName != "" {
		if !out.EncryptRequired {
			// Its file is only POSTed for with a password: a GET of this link is 403.
			out.DownloadURL = base + apiv1.FilePath(j.ID)
		}
		out.File = &apiv1.File{Name: DownloadName(args, j), Size: j.FileSize, SHA256: j.FileSHA256}
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// argsShown decodes stored args for JobJSON. Its Spec, shallower than the embedded
// Args.Spec, takes the "spec" key and keeps only the download name's pattern, so the
// report's snapshot (its query, columns and parameters, most of a stored job's args) is
// skipped rather than decoded for every 202, event and listing row.
type argsShown struct {
	Args
	Spec *struct {
		Filename string `json:"filename"`
		Encrypt  bool   `json:"encrypt"`
	} `json:"spec"`
}

// shownArgs decodes what JobJSON shows of stored args; a job of another kind shows no
// report or params.
func shownArgs(raw json.RawMessage) Args {
	var v argsShown
	_ = json.Unmarshal(raw, &v)
	a := v.Args
	if v.Spec != nil {
		a.Spec = &Report{Filename: v.Spec.Filename, Encrypt: v.Spec.Encrypt}
	}
	return a
}

// ReportOf is the report id export job j's args name ("" when they name none): cheaper
// than JobJSON where the report is all that is wanted (a listing's filter, a page's
// title).
func ReportOf(j store.Job) string {
	var a struct {
		Report string `json:"report"`
	}
	_ = json.Unmarshal(j.Args, &a)
	return a.Report
}
