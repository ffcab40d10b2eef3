package cli

import (
	"bytes"
	"encoding/json"
	"flag"
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

// zoneFlag is where a command shows times: in the local time zone (time.Local, which
// the TZ variable sets) or, with --utc, in UTC. Every time it shows carries its zone's
// short name ("2027-01-01 06:00 CET"), so that no time reads as another zone's (issue
// 37); --json keeps the server's RFC 3339.
type zoneFlag struct{ utc bool }

func (z *zoneFlag) register(fs *flag.FlagSet) {
	fs.BoolVar(&z.utc, "utc", false, "show times in UTC instead of the local time zone")
}

// Layouts of zoneFlag.format: an export's and an event's times to the second, a
// schedule's (which fall on whole minutes) to the minute.
const (
	toSecond = "2006-01-02 15:04:05 MST"
	toMinute = "2006-01-02 15:04 MST"
)

// format is t in z's zone in layout, which ends with the zone's name (MST); "" for nil.
// Every time the CLI prints outside --json goes through it.
func (z zoneFlag) format(t *time.Time, layout string) string {
	if t == nil {
		return ""
	}
	loc := time.Local
	if z.utc {
		loc = time.UTC
	}
	return t.In(loc).Format(layout)
}
