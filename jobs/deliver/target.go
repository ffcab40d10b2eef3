// Package deliver is where a schedule's exports go once they succeed (issue 20): an email
// with the file attached (or a link above a size limit), a signed webhook, or a copy in
// a folder. This file is the contract between the schedules (which store a list of
// targets and copy it into each firing's args, export.Args.Deliver) and the deliveries.
package deliver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"sheetq/jobs/webhook"
)

// The kinds of target.
const (
	TypeEmail   = "email"
	TypeWebhook = "webhook"
	TypeFolder  = "folder"
)

// Target is one place a schedule's file goes. Type says which fields count:
//
//	{"type": "email", "to": ["ann@example.com"]}
//	{"type": "webhook", "url": "https://hooks.example.com/sheetq"}
//	{"type": "folder", "path": "/srv/reports/monthly"}
//
// An email or folder target may carry "password": where the password to encrypt the
// file with is (env:SHEETQ_PASSWORD_<NAME> or file:PATH), read at each delivery and
// never stored, mailed or logged:
//
//	{"type": "email", "to": ["ann@example.com"], "password": "env:SHEETQ_PASSWORD_PAYROLL"}
type Target struct {
	Type     string   `json:"type"`
	To       []string `json:"to,omitempty"`
	URL      string   `json:"url,omitempty"`
	Path     string   `json:"path,omitempty"`
	Password string   `json:"password,omitempty"`
}

// PasswordEnvPrefix starts the name of every environment variable a target's password
// may be read from: a schedule's owner may not encrypt a file with another secret of
// the server (its database's password, say), which they could then try to guess offline
// from the file.
const PasswordEnvPrefix = "SHEETQ_PASSWORD_"

// passwordEnvRe is a variable a password may be read from.
var passwordEnvRe = regexp.MustCompile(`^SHEETQ_PASSWORD_[A-Za-z0-9_]+$`)

// checkPasswordRef says what is wrong with a target's "password": it must say where the
// password is, never be the password (and so is never quoted back).
func checkPasswordRef(ref string) error {
	if name, ok := strings.CutPrefix(ref, "env:"); ok {
		if !passwordEnvRe.MatchString(name) {
			return errors.New(`"password": env: names a variable whose name starts with ` + PasswordEnvPrefix + `, such as env:SHEETQ_PASSWORD_PAYROLL`)
		}
		return nil
	}
	if path, ok := strings.CutPrefix(ref, "file:"); ok {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsFunc(path, unicode.IsControl) {
			return errors.New(`"password": file: names an absolute, clean path of a file that holds the password`)
		}
		return nil
	}
	return errors.New(`"password" says where the password is, env:SHEETQ_PASSWORD_<NAME> or file:PATH, never the password itself (a schedule is not the place to keep it)`)
}

// MaxTargets bounds a schedule's list: a schedule is not a mailing list.
const MaxTargets = 20

// MaxRecipients bounds the addresses a schedule's email targets name, one target's and
// all of them together: each firing mails every one of them, so 20 targets of 50
// addresses would mail 1,000 recipients a firing (issue 36). An address named twice
// counts twice, since it is mailed twice.
const MaxRecipients = 50

// ParseTargets reads and checks a list of targets (JSON); an empty or null list is none.
// Each error names the target by its place in the list ("deliver[1]: ...", a
// *TargetError).
func ParseTargets(raw json.RawMessage) ([]Target, error) {
	ts, err := DecodeTargets(raw)
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	for i, t := range ts {
		if err := t.Check(); err != nil {
			return nil, &TargetError{Index: i, Err: err}
		}
	}
	return ts, nil
}

// DecodeTargets reads a list of targets (JSON) as ParseTargets does, without checking
// each one: for a caller that checks them all and reports every wrong one.
func DecodeTargets(raw json.RawMessage) ([]Target, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var ts []Target
	if err := dec.Decode(&ts); err != nil {
		return nil, fmt.Errorf("want a list of targets such as [{\"type\": \"email\", \"to\": [\"ann@example.com\"]}]: %v", err)
	}
	if len(ts) > MaxTargets {
		return nil, fmt.Errorf("%d targets, at most %d", len(ts), MaxTargets)
	}
	recipients := 0
	for _, t := range ts {
		if t.Type == TypeEmail {
			recipients += len(t.To)
		}
	}
	if recipients > MaxRecipients {
		return nil, fmt.Errorf("the email targets name %d addresses in all, at most %d", recipients, MaxRecipients)
	}
	return ts, nil
}

// TargetError is what is wrong with one target of a list: Index is its place, from 0.
type TargetError struct {
	Index int
	Err   error
}

func (e *TargetError) Error() string { return fmt.Sprintf("deliver[%d]: %v", e.Index, e.Err) }

func (e *TargetError) Unwrap() error { return e.Err }

// Check says what is wrong with t on its own (the server's settings, such as the
// folders it may write to, are checked where they are known).
func (t Target) Check() error {
	if t.Password != "" {
		if t.Type == TypeWebhook {
			return errors.New(`a webhook target carries no file, so it takes no "password"`)
		}
		if err := checkPasswordRef(t.Password); err != nil {
			return err
		}
	}
	switch t.Type {
	case TypeEmail:
		if len(t.To) == 0 || len(t.To) > MaxRecipients || t.URL != "" || t.Path != "" {
			return fmt.Errorf(`an email target has "to": 1 to %d addresses, and nothing else`, MaxRecipients)
		}
		for _, a := range t.To {
			addr, err := mail.ParseAddress(a)
			if err != nil || addr.Address != strings.TrimSpace(a) {
				return fmt.Errorf("%q is not an email address (write ann@example.com, without a name)", a)
			}
			// RFC 5321 (4.5.3.1): a mailbox's local part is at most 64 octets and a path
			// at most 256 with its angle brackets; longer is refused by the relay at
			// every firing, so it is refused here, when the schedule is saved.
			if local, _, _ := strings.Cut(addr.Address, "@"); len(local) > 64 || len(addr.Address) > 254 {
				return fmt.Errorf("%.40q... is too long for an email address (at most 64 characters before the @, 254 in all)", a)
			}
		}
	case TypeWebhook:
		// The form an export request's webhook must have (webhook.ValidateURL): a URL
		// over its bound or with a port out of range fails at every firing. The URL is
		// not quoted back, since it may carry a token.
		if len(t.URL) > webhook.MaxURLLength {
			return fmt.Errorf("a webhook target's url is %d characters long, at most %d", len(t.URL), webhook.MaxURLLength)
		}
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(t.To) > 0 || t.Path != "" {
			return errors.New(`a webhook target has "url": an http or https URL, and nothing else`)
		}
		if _, err := webhook.ValidateURL(t.URL); err != nil {
			return fmt.Errorf("a webhook target's url: %w", err)
		}
	case TypeFolder:
		if t.Path == "" || !filepath.IsAbs(t.Path) || filepath.Clean(t.Path) != t.Path || len(t.To) > 0 || t.URL != "" {
			return errors.New(`a folder target has "path": an absolute, clean folder path, and nothing else`)
		}
		// A NUL cannot be in a file name (the copy would fail at every firing), and
		// other control characters are a typing or pasting mistake.
		if strings.ContainsFunc(t.Path, unicode.IsControl) {
			return fmt.Errorf("folder path %q has a control character", t.Path)
		}
	default:
		return fmt.Errorf("type %q: want email, webhook or folder", t.Type)
	}
	return nil
}
