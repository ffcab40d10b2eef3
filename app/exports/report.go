package exports

import (
	"context"
	"errors"

	"sheetq/app/access"

	"sheetq/jobs/export"
)

// Report is a report as GET /api/v1/reports shows it, and as the Reports page reads it;
// a broken file is listed with its error instead of disappearing.
type Report struct {
	ID          string         `json:"id"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	Source      string         `json:"source,omitempty"`
	Sheet       string         `json:"sheet,omitempty"`
	Params      []export.Param `json:"params"`
	// Columns are the report's column lines: label, type and number format by column
	// name; a column without a line is as its source gives it.
	Columns []export.ColumnSpec `json:"columns"`
	// Filename is the download name's pattern, without the extension.
	Filename string `json:"filename,omitempty"`
	Count    bool   `json:"count,omitempty"`
	// Access are the groups that may run the report ("-- access:"), shown to admins.
	Access []string   `json:"access,omitempty"`
	SQL    string     `json:"sql,omitempty"`
	File   string     `json:"file,omitempty"`
	Error  *LoadError `json:"error,omitempty"`
	// Resumes says whether an export of the report continues from its last checkpoint
	// after a crash; ResumeNote says why not when it does not.
	Resumes    bool   `json:"resumes"`
	ResumeNote string `json:"resume_note,omitempty"`
	// Encrypt says that the report's files are handed out only encrypted with a
	// password ("-- encrypt: required"), and only as xlsx.
	Encrypt bool `json:"encrypt"`
}

// LoadError is why a report file did not load, with where when known.
type LoadError struct {
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// ReportOf is a catalog entry as a Report.
func ReportOf(e export.Entry) Report {
	r := e.Report
	out := Report{ID: r.ID, Title: r.Title, Description: r.Description, Source: r.Source, Sheet: r.Sheet, Params: r.Params,
		Columns: r.Columns, Filename: r.Filename, Count: r.Count, SQL: r.Query, File: e.File, Access: r.Access,
		Encrypt: r.Encrypt}
	if out.Params == nil {
		out.Params = []export.Param{}
	}
	if out.Columns == nil {
		out.Columns = []export.ColumnSpec{}
	}
	if e.Err != nil {
		le := &LoadError{Message: e.Err.Error(), File: e.File}
		var pe *export.ParseError
		if errors.As(e.Err, &pe) {
			le.Message, le.File, le.Line = pe.Msg, pe.File, pe.Line
		}
		out.Error = le
	}
	return out
}

// ReportWithResume is ReportFor with whether the report's exports resume after a crash.
func (s *Service) ReportWithResume(ctx context.Context, e export.Entry) Report {
	out := ReportFor(ctx, e)
	if e.Err == nil && s.Kind != nil {
		out.Resumes, out.ResumeNote = s.Kind.Resumable(e.Report)
		if !access.From(ctx).IsAdmin() && !out.Resumes {
			out.ResumeNote = "" // it may name the report's SQL
		}
	}
	return out
}

// ReportFor is ReportOf as ctx's identity may read it: a member does not see a report's
// SQL, its file or the groups it is open to (which name other teams).
func ReportFor(ctx context.Context, e export.Entry) Report {
	out := ReportOf(e)
	if !access.From(ctx).IsAdmin() {
		out.SQL, out.File, out.Access = "", "", nil
	}
	return out
}
