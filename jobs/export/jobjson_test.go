package export_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sheetq/jobs/export"
	"sheetq/store"
)

var day = time.Date(2025, 3, 4, 23, 30, 0, 123e6, time.UTC)

func TestDownloadName(t *testing.T) {
	j := store.Job{ID: "0123456789abcdef", CreatedAt: day, FinishedAt: day.Add(time.Hour)}
	tests := []struct{ report, want string }{
		{"demo", "demo-2025-03-05-01234567.xlsx"},
		{"orders by/month", "orders-by-month-2025-03-05-01234567.xlsx"},
		{"ünïcode", "-n-code-2025-03-05-01234567.xlsx"},
		{"", "export-2025-03-05-01234567.xlsx"},
	}
	for _, tt := range tests {
		if got := export.DownloadName(export.Args{Report: tt.report}, j); got != tt.want {
			t.Errorf("DownloadName(%q) = %q, want %q", tt.report, got, tt.want)
		}
	}
	unfinished := store.Job{ID: "short", CreatedAt: day}
	if got, want := export.DownloadName(export.Args{Report: "demo"}, unfinished), "demo-2025-03-04-short.xlsx"; got != want {
		t.Errorf("unfinished: %q, want %q", got, want)
	}
}

// TestJobJSON pins the job's JSON (docs/api.md, "HTTP API (v1)"): field names, which ones are
// null or left out in each state, and the absolute link a base URL gives.
func TestJobJSON(t *testing.T) {
	args := json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01"},"spec":{"id":"orders"}}`)
	base := store.Job{ID: "0123456789abcdef", Kind: export.Name, Args: args, MaxAttempts: 3,
		CreatedAt: day, ProgressTotal: -1, CreatedBy: "ci"}
	succeeded := base
	succeeded.Status, succeeded.Attempt, succeeded.StartedAt, succeeded.HeartbeatAt, succeeded.FinishedAt =
		store.StatusSucceeded, 1, day, day, day
	succeeded.ProgressRows, succeeded.ProgressTotal = 7, 7
	succeeded.FileName, succeeded.FileSize, succeeded.FileSHA256 = "0123456789abcdef.xlsx", 42, "ab"
	succeeded.Warnings = []string{"w"}
	retrying := base
	retrying.Status, retrying.Attempt, retrying.RunAt = store.StatusPending, 1, day.Add(time.Minute)
	retrying.ErrorCode, retrying.ErrorMessage = "io", "disk"
	// Left over from the attempt that failed: not shown while it waits.
	retrying.ProgressRows, retrying.ProgressTotal = 62503, 100000
	failed := retrying
	failed.Status, failed.Attempt, failed.FinishedAt = store.StatusFailed, 3, day
	running := base
	running.Status, running.Attempt, running.StartedAt, running.CancelRequested = store.StatusProcessing, 1, day, true
	running.Args = json.RawMessage(`{"report":"orders"}`)
	csvDone := succeeded
	csvDone.Args = json.RawMessage(`{"report":"orders","params":{},"format":"csv","bom":true}`)
	csvDone.FileName, csvDone.Warnings = "0123456789abcdef.csv", nil
	// Formulas kept are shown; neutralised ones (the default, also when named) and
	// "keep" in args that are not csv (which no request makes) are not.
	csvKept := csvDone
	csvKept.Status = store.StatusPending
	csvKept.Args = json.RawMessage(`{"report":"orders","params":{},"format":"csv","csv_formulas":"keep"}`)
	csvNeutral := csvKept
	csvNeutral.Args = json.RawMessage(`{"report":"orders","params":{},"format":"csv","csv_formulas":"neutralise"}`)
	xlsxKeep := csvKept
	xlsxKeep.Args = json.RawMessage(`{"report":"orders","params":{},"csv_formulas":"keep"}`)
	// A schedule's firing, whose report names its files: the name comes from the
	// pattern in the args' snapshot, the schedule's fields from the args.
	named := succeeded
	named.Args = json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01"},"spec":{"id":"orders","query":"select 1","filename":"orders-{from}"},` +
		`"schedule_id":"s1","scheduled_for":"2025-03-04T06:00:00Z","timezone":"Europe/Berlin"}`)
	named.Warnings = nil
	const created = `"created_at":"2025-03-04T23:30:00.123Z"`
	tests := []struct {
		name string
		job  store.Job
		base string
		want string
	}{
		{"pending", func() store.Job { j := base; j.Status = store.StatusPending; return j }(), "",
			`{"id":"0123456789abcdef","status":"PENDING","report":"orders","created_by":"ci","params":{"from":"2024-01-01"},"format":"xlsx","attempt":0,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":null,"heartbeat_at":null,"finished_at":null}`},
		{"retrying", retrying, "",
			`{"id":"0123456789abcdef","status":"PENDING","report":"orders","created_by":"ci","params":{"from":"2024-01-01"},"format":"xlsx","attempt":1,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":null,"heartbeat_at":null,"finished_at":null,"next_attempt_at":"2025-03-04T23:31:00.123Z","error":{"code":"io","message":"disk"}}`},
		{"failed: the rows it reached", failed, "",
			`{"id":"0123456789abcdef","status":"FAILED","report":"orders","created_by":"ci","params":{"from":"2024-01-01"},"format":"xlsx","attempt":3,"max_attempts":3,"progress":{"rows":62503,"total_rows":100000},` +
				created + `,"started_at":null,"heartbeat_at":null,"finished_at":"2025-03-04T23:30:00.123Z","error":{"code":"io","message":"disk"}}`},
		{"running, no params, cancel asked", running, "",
			`{"id":"0123456789abcdef","status":"PROCESSING","report":"orders","created_by":"ci","params":{},"format":"xlsx","attempt":1,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":null,"finished_at":null,"cancel_requested":true}`},
		{"succeeded, base url", succeeded, "https://sheetq.example.com",
			`{"id":"0123456789abcdef","status":"SUCCEEDED","report":"orders","created_by":"ci","params":{"from":"2024-01-01"},"format":"xlsx","attempt":1,"max_attempts":3,"progress":{"rows":7,"total_rows":7},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z",` +
				`"download_url":"https://sheetq.example.com/api/v1/exports/0123456789abcdef/file","file":{"name":"orders-2025-03-04-01234567.xlsx","size":42,"sha256":"ab"},"warnings":["w"]}`},
		{"csv with a BOM", csvDone, "",
			`{"id":"0123456789abcdef","status":"SUCCEEDED","report":"orders","created_by":"ci","params":{},"format":"csv","bom":true,"attempt":1,"max_attempts":3,"progress":{"rows":7,"total_rows":7},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z",` +
				`"download_url":"/api/v1/exports/0123456789abcdef/file","file":{"name":"orders-2025-03-04-01234567.csv","size":42,"sha256":"ab"}}`},
		{"csv, formulas kept", csvKept, "",
			`{"id":"0123456789abcdef","status":"PENDING","report":"orders","created_by":"ci","params":{},"format":"csv","csv_formulas":"keep","attempt":1,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z"}`},
		{"csv, formulas neutralised", csvNeutral, "",
			`{"id":"0123456789abcdef","status":"PENDING","report":"orders","created_by":"ci","params":{},"format":"csv","attempt":1,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z"}`},
		{"xlsx, keep in its args", xlsxKeep, "",
			`{"id":"0123456789abcdef","status":"PENDING","report":"orders","created_by":"ci","params":{},"format":"xlsx","attempt":1,"max_attempts":3,"progress":{"rows":0},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z"}`},
		{"scheduled, named by its report", named, "",
			`{"id":"0123456789abcdef","status":"SUCCEEDED","report":"orders","created_by":"ci","params":{"from":"2024-01-01"},"format":"xlsx",` +
				`"attempt":1,"max_attempts":3,"progress":{"rows":7,"total_rows":7},` +
				created + `,"started_at":"2025-03-04T23:30:00.123Z","heartbeat_at":"2025-03-04T23:30:00.123Z","finished_at":"2025-03-04T23:30:00.123Z",` +
				`"download_url":"/api/v1/exports/0123456789abcdef/file","file":{"name":"orders-2024-01-01.xlsx","size":42,"sha256":"ab"},` +
				`"schedule_id":"s1","scheduled_for":"2025-03-04T06:00:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(export.JobJSON(tt.job, tt.base))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
	if got := export.JobJSON(succeeded, "").DownloadURL; got != "/api/v1/exports/0123456789abcdef/file" {
		t.Errorf("download_url without a base: %q", got)
	}
	if got, want := (&export.Kind{}).FileName("x", nil), fmt.Sprint("x", export.FileExt); got != want {
		t.Errorf("FileName = %q, want %q", got, want)
	}
}

// BenchmarkJobJSON: the job shape of every 202, event and listing row, for a job whose
// args hold the demo report's snapshot, as an accepted export's do.
func BenchmarkJobJSON(b *testing.B) {
	demo := export.Builtin()[0]
	args, err := json.Marshal(export.Args{Report: demo.ID, Params: map[string]any{"rows": 2000, "seconds": 0}, Spec: &demo})
	if err != nil {
		b.Fatal(err)
	}
	j := store.Job{ID: "0123456789abcdef", Kind: export.Name, Status: store.StatusPending, Args: args,
		MaxAttempts: 3, CreatedAt: day, ProgressTotal: -1}
	b.ReportAllocs()
	for b.Loop() {
		if got := export.JobJSON(j, ""); got.Report != demo.ID {
			b.Fatalf("report %q", got.Report)
		}
	}
}
