package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"

	"sheetq/internal/apiv1"
)

// Problem is a problem detail (RFC 9457) the server answered instead of a 2xx, in the
// server's own shape (internal/apiv1).
type Problem struct{ apiv1.Problem }

// Error is one line: "server: CODE: detail (HTTP status)", naming the param when the
// detail does not.
func (p *Problem) Error() string {
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if p.Param != "" && !strings.Contains(msg, p.Param) {
		msg = "param " + p.Param + ": " + msg
	}
	if p.Code != "" {
		msg = p.Code + ": " + msg
	}
	return OneLine(fmt.Sprintf("server: %s (HTTP %d)", msg, p.Status))
}

// OneLine puts a multi-line message on one line, its runs of white space (line breaks,
// the tabs pgx indents each address it tried with) and control characters one space
// each: a problem's detail so, the CLI every error it exits with, doctor each finding,
// and the jobs commands the server's free text (an export's error, an event's data) in
// their human output. A control character (\r, ESC, backspace) would let such text
// redraw the terminal's line.
func OneLine(msg string) string {
	return strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// readProblem turns a non-2xx answer into a *Problem: its problem+json, else the status
// line and a short plain body (a proxy's error page, say).
func readProblem(resp *http.Response) *Problem {
	p := &Problem{apiv1.Problem{Status: resp.StatusCode}}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if json.Unmarshal(b, p) != nil || (p.Detail == "" && p.Code == "") {
		p.Title = resp.Status
		if s := strings.TrimSpace(string(b)); s != "" && len(s) < 200 {
			p.Detail = s
		}
	}
	p.Status = resp.StatusCode
	return p
}

// Refused tells whether err is the server's answer to the request itself (a problem
// below 500): sending the same request again would get the same answer. Network errors
// and 5xx answers are not refusals.
func Refused(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status < 500
}
