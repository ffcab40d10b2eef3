package export

import (
	"encoding/json"
	"fmt"
)

// The file formats an export is written in (Args.Format).
const (
	FormatXLSX = "xlsx"
	FormatCSV  = "csv"
)

// CSVExt is the extension of a csv export's file, published and downloaded; FileExt is
// an xlsx export's.
const CSVExt = ".csv"

// Content types of an export's download, by format.
const (
	XLSXContentType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	// The charset is stated because a csv file carries no declaration of its own, and
	// without a BOM a reader would otherwise guess.
	CSVContentType = "text/csv; charset=utf-8"
)

// FormatError is a request for a file format (or a BOM) this server does not write.
type FormatError struct{ Message string }

func (e *FormatError) Error() string { return e.Message }

// WithFormat returns a with the file format of a request: format "xlsx" or "" (the
// default) or "csv", and bom, which asks a csv file to start with a UTF-8 byte order
// mark (Excel reads a csv file as UTF-8 only with it). xlsx is stored as "", so that
// the args and the idempotency hash of a request that names no format are what they
// were before there was a choice. The error is a *FormatError.
func (a Args) WithFormat(format string, bom bool) (Args, error) {
	switch format {
	case "", FormatXLSX:
		if bom {
			return a, &FormatError{`"bom" applies to csv files only; ask for "format": "csv" with it`}
		}
		a.Format, a.BOM = "", false
	case FormatCSV:
		a.Format, a.BOM = FormatCSV, bom
	default:
		return a, &FormatError{fmt.Sprintf(`format %q: want "xlsx" or "csv"`, format)}
	}
	return a, nil
}

// FileFormat is the format the args' file is written in: FormatXLSX or FormatCSV.
func (a Args) FileFormat() string {
	if a.Format == FormatCSV {
		return FormatCSV
	}
	return FormatXLSX
}

// FileExt is the extension of the args' file: FileExt or CSVExt.
func (a Args) FileExt() string {
	if a.Format == FormatCSV {
		return CSVExt
	}
	return FileExt
}

// ContentType is the media type the args' file is downloaded as.
func (a Args) ContentType() string {
	if a.Format == FormatCSV {
		return CSVContentType
	}
	return XLSXContentType
}

// formatOf reads the file format (Format and BOM) of a job's stored args, and nothing
// else of them; args of another kind, or none, are xlsx's.
func formatOf(raw json.RawMessage) Args {
	var a struct {
		Format string `json:"format"`
		BOM    bool   `json:"bom"`
	}
	_ = json.Unmarshal(raw, &a) // the zero value is xlsx, what a job without a format is
	return Args{Format: a.Format, BOM: a.BOM}
}
