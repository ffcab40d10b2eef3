package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	// One line whatever the server sent: a bare \r would let a detail overwrite the line
	// on a terminal.
	return strings.Join(strings.Fields(fmt.Sprintf("server: %s (HTTP %d)", msg, p.Status)), " ")
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
