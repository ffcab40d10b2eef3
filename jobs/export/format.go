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

// The values of a request's "csv_formulas" (Args.CSVFormulas).
const (
	// CSVNeutralise, the default, writes a csv text field that starts with = + - @, a
	// tab or a CR with a leading ', so that a spreadsheet shows it instead of running
	// it. It is stored as "".
	CSVNeutralise = "neutralise"
	// CSVKeep writes every text field as the source holds it.
	CSVKeep = "keep"
)

// FileOptions is how a request asks for its file to be written: its "format", "bom"
// and "csv_formulas" (docs/api.md). The zero value asks for xlsx.
type FileOptions struct {
	// Format is "xlsx" or "" (the default) or "csv".
	Format string
	// BOM asks a csv file to start with a UTF-8 byte order mark (Excel reads a csv file
	// as UTF-8 only with it).
	BOM bool
	// CSVFormulas is CSVNeutralise or "" (the default) or CSVKeep.
	CSVFormulas string
}

// FormatError is a request for a file format (or a BOM, or kept formulas) this server
// does not write.
type FormatError struct{ Message string }

func (e *FormatError) Error() string { return e.Message }

// WithFile returns a with the file a request asks for (f). xlsx is stored as "", and
// neutralised formulas as "", so that the args and the idempotency hash of a request
// that names neither are what they were before there was a choice. A BOM, or kept
// formulas, with xlsx is refused: they apply to csv files only; "neutralise" with xlsx
// is accepted, being what an xlsx file does anyway (it keeps text as text). The error
// is a *FormatError.
func (a Args) WithFile(f FileOptions) (Args, error) {
	switch f.Format {
	case "", FormatXLSX, FormatCSV:
	default:
		return a, &FormatError{fmt.Sprintf(`format %q: want "xlsx" or "csv"`, f.Format)}
	}
	switch f.CSVFormulas {
	case "", CSVNeutralise, CSVKeep:
	default:
		return a, &FormatError{fmt.Sprintf(`csv_formulas %q: want "neutralise" (the default) or "keep"`, f.CSVFormulas)}
	}
	keep := f.CSVFormulas == CSVKeep
	if f.Format != FormatCSV {
		switch {
		case f.BOM:
			return a, &FormatError{`"bom" applies to csv files only; ask for "format": "csv" with it`}
		case keep:
			return a, &FormatError{`"csv_formulas": "keep" applies to csv files only; ask for "format": "csv" with it`}
		}
		a.Format, a.BOM, a.CSVFormulas = "", false, ""
		return a, nil
	}
	a.Format, a.BOM, a.CSVFormulas = FormatCSV, f.BOM, ""
	if keep {
		a.CSVFormulas = CSVKeep
	}
	return a, nil
}

// KeepsFormulas reports whether the args' file is csv with its text fields written as
// the source held them (CSVKeep); anything else in CSVFormulas neutralises.
func (a Args) KeepsFormulas() bool { return a.Format == FormatCSV && a.CSVFormulas == CSVKeep }

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
