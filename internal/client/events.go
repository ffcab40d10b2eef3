package client

import (
	"bufio"
	"io"
	"strings"
)

// Event is one server-sent event of /api/v1/events: its id (empty for progress and
// deleted, which are never replayed), its type, and its data lines joined with "\n".
type Event struct {
	ID, Type string
	Data     []byte
}

// ReadEvents parses the text/event-stream r and calls fn with each event at the blank
// line that ends it, until r ends or fails or fn returns false. Blocks with nothing but
// comments (the keep-alives) are skipped.
func ReadEvents(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a snapshot event can be large
	var ev Event
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if ev.ID != "" || ev.Type != "" || len(ev.Data) > 0 {
				if !fn(ev) {
					return nil
				}
			}
			ev = Event{}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Type = value
		case "data":
			if len(ev.Data) > 0 {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
		case "id":
			ev.ID = value
		}
	}
	return sc.Err()
}
