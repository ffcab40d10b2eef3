package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeIndented writes a JSON answer indented, ending with a newline.
func writeIndented(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		buf.Reset()
		buf.Write(bytes.TrimSpace(b))
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// fmtTime is a time in the local zone to the second, or "" for none.
func fmtTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
