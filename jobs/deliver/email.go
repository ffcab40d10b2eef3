package deliver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wneessen/go-mail"

	"sheetq/internal/envref"
	"sheetq/internal/officecrypt"
	"sheetq/jobs"
)

// STARTTLS policies of [smtp] starttls.
const (
	StartTLSMandatory     = "mandatory"     // refuse to send without STARTTLS (the default)
	StartTLSOpportunistic = "opportunistic" // use it when the relay offers it
	StartTLSNone          = "none"          // plain text: a relay on loopback only
)

// SMTP is the [smtp] table of the config file: the relay that email deliveries go through.
type SMTP struct {
	// Host is the relay's host name; empty: email deliveries are not configured.
	Host string `toml:"host"`
	// Port defaults to 587 (submission).
	Port int `toml:"port"`
	// Username and Password authenticate after STARTTLS (any mechanism the relay offers);
	// the password may be env:NAME. No username: no authentication.
	Username string `toml:"username"`
	Password string `toml:"password"`
	// From is the sender's address ("sheetq <reports@example.com>" or a bare address).
	From string `toml:"from"`
	// StartTLS is mandatory (default), opportunistic or none.
	StartTLS string `toml:"starttls"`
	// CAFile, when set, is a PEM file of the certificates that sign the relay's (a
	// private CA or a self-signed relay); the system's roots otherwise.
	CAFile string `toml:"ca_file"`
}

// Resolved returns s with an env:NAME password read from the environment.
func (s SMTP) Resolved() (SMTP, error) {
	p, err := envref.Resolve(s.Password)
	if err != nil {
		return s, fmt.Errorf("smtp: password: %w", err)
	}
	s.Password = p
	return s, nil
}

// check validates the settings once at start.
func (s SMTP) check() error {
	if s.Host == "" {
		return nil
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("smtp: port %d: want 1-65535", s.Port)
	}
	switch s.StartTLS {
	case "", StartTLSMandatory, StartTLSOpportunistic, StartTLSNone:
	default:
		return fmt.Errorf("smtp: starttls %q: want mandatory, opportunistic or none", s.StartTLS)
	}
	if s.From == "" {
		return errors.New("smtp: from: the sender's address is required")
	}
	if err := mail.NewMsg().From(s.From); err != nil {
		return fmt.Errorf("smtp: from %q: %w", s.From, err)
	}
	if s.CAFile != "" {
		if _, err := s.roots(); err != nil {
			return err
		}
	}
	return nil
}

// roots reads CAFile.
func (s SMTP) roots() (*x509.CertPool, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("smtp: ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("smtp: ca_file %s holds no PEM certificate", s.CAFile)
	}
	return pool, nil
}

// client builds a client for one attempt.
func (s SMTP) client(timeout time.Duration) (*mail.Client, error) {
	policy := mail.TLSMandatory
	switch s.StartTLS {
	case StartTLSOpportunistic:
		policy = mail.TLSOpportunistic
	case StartTLSNone:
		policy = mail.NoTLS
	}
	tc := &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pool, err := s.roots()
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	opts := []mail.Option{mail.WithPort(cmp.Or(s.Port, 587)), mail.WithTLSPolicy(policy), mail.WithTLSConfig(tc),
		mail.WithTimeout(timeout)}
	if s.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(s.Username), mail.WithPassword(s.Password))
	}
	return mail.NewClient(s.Host, opts...)
}

// email sends the export to the target's addresses: attached when it is at most
// AttachLimit, as a link to the download otherwise. Every attempt's message has the
// same Message-ID, so that a receiver can tell a resend after a lost answer.
func (h *Handler) email(ctx context.Context, jobID string, a Args) (mode string, err error) {
	smtp := h.cfg.SMTP
	if smtp.Host == "" {
		return "", jobs.Permanentf("smtp_not_configured", "email delivery needs an SMTP relay: set [smtp] host in the config file")
	}
	var password string
	size := a.Size
	if a.Encrypted() {
		if password, err = h.password(a.Target); err != nil {
			// An operator can set the variable or put the file back: worth retrying.
			return "", jobs.Retryable("password_unavailable", err)
		}
		size = officecrypt.EncryptedSize(a.Size)
	}
	mode = "attachment"
	if size > h.cfg.AttachLimit {
		mode = "link"
		if h.cfg.BaseURL == "" {
			return mode, jobs.Permanentf("no_base_url", "the file (%s) is over [deliveries] attach_limit (%s), so the mail would carry a link, but the server has no public URL to link to: set --base-url (SHEETQ_BASE_URL)",
				humanSize(a.Size), humanSize(h.cfg.AttachLimit))
		}
	}
	m := mail.NewMsg()
	if err := m.From(smtp.From); err != nil {
		return mode, jobs.Permanent("bad_sender", err)
	}
	if err := m.To(a.Target.To...); err != nil {
		return mode, jobs.Permanent("bad_recipient", err)
	}
	m.SetMessageIDWithValue(jobID + ".sheetq@" + messageHost(smtp.From))
	m.SetDateWithValue(h.cfg.Now())
	m.Subject(Subject(a))
	if mode == "attachment" {
		f, _, err := h.cfg.Files.Open(ctx, a.File)
		if err != nil {
			return mode, fileError(err)
		}
		defer f.Close()
		var file io.ReadSeeker = f
		if password != "" {
			// At most AttachLimit bytes, encrypted in memory once per attempt: the
			// relay may ask for the message more than once, and the file store's
			// reader cannot be read twice through the encryption.
			enc, err := encryptAll(f, a, password)
			if err != nil {
				return mode, err
			}
			file = bytes.NewReader(enc)
		}
		m.AttachReadSeeker(a.DownloadName, file, mail.WithFileContentType(mail.ContentType(cmp.Or(a.ContentType, "application/octet-stream"))))
		m.SetBodyString(mail.TypeTextPlain, Body(a, ""))
	} else {
		m.SetBodyString(mail.TypeTextPlain, Body(a, h.cfg.BaseURL))
	}
	c, err := smtp.client(h.cfg.Timeout)
	if err != nil {
		return mode, jobs.Permanent("smtp_config", err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		return mode, smtpError(err)
	}
	return mode, nil
}

// encryptAll reads the export's file from src and returns it encrypted with password,
// having checked that the bytes read are the ones the export recorded.
func encryptAll(src io.Reader, a Args, password string) ([]byte, error) {
	var out bytes.Buffer
	sum := sha256.New()
	if err := officecrypt.Encrypt(&out, io.TeeReader(src, sum), a.Size, password); err != nil {
		return nil, jobs.Retryable("file_mismatch", fmt.Errorf("the export's file could not be read whole: %w", err))
	}
	if a.SHA256 != "" && hex.EncodeToString(sum.Sum(nil)) != a.SHA256 {
		return nil, jobs.Retryable("file_mismatch", errors.New("the export's file read back with a sha256 other than the export recorded"))
	}
	return out.Bytes(), nil
}

// smtpError classifies a failed send: a relay's permanent (5xx) refusal is final,
// anything else (no connection, a 4xx, a timeout) is worth another attempt.
func smtpError(err error) error {
	var se *mail.SendError
	if errors.As(err, &se) && !se.IsTemp() && se.ErrorCode() >= 500 {
		return jobs.Permanent("smtp_refused", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return jobs.Retryable("smtp_timeout", err)
	}
	return jobs.Retryable("smtp", err)
}

// messageHost is the domain part of the sender, for Message-IDs.
func messageHost(from string) string {
	if i := strings.LastIndexByte(from, '@'); i >= 0 {
		return strings.Trim(from[i+1:], "> ")
	}
	return "sheetq.invalid"
}

// MaxSubject bounds a mail's subject, in characters: a parameter of 60,000 characters
// would otherwise make a subject of 60 KB (issue 36), which relays refuse or fold into
// something no one reads. maxSubjectValue bounds each parameter's value in it; the body
// says them whole.
const (
	MaxSubject      = 200
	maxSubjectValue = 40
)

// Subject is the mail's subject: the report's title, its parameters and, for a
// schedule's firing, the time it was scheduled for. It is at most MaxSubject characters:
// a long value is cut, then the title and parameters, never the time.
func Subject(a Args) string {
	s := a.Title
	if p := paramsLine(a.Params, maxSubjectValue); p != "" {
		s += " (" + p + ")"
	}
	when := ""
	if a.ScheduledFor != nil {
		when = " for " + scheduledAt(a)
	}
	// A subject is one line: a value's line break or tab is a space in it.
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return cut(s, MaxSubject-utf8.RuneCountInString(when)) + when
}

// cut is s cut to at most n characters, on a character boundary, with an ellipsis
// in place of what is cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	i, runes := 0, 0
	for j := range s {
		if runes == n-1 {
			i = j
			break
		}
		runes++
	}
	return s[:i] + "…"
}

// scheduledAt is the time a firing was for at its schedule's wall time, with the zone's
// name ("2026-12-01 06:00 Europe/Berlin"); with the offset when the args name no zone
// (a delivery queued before they did) or one this build does not know.
func scheduledAt(a Args) string {
	if loc, err := time.LoadLocation(a.TimeZone); err == nil && a.TimeZone != "" {
		return a.ScheduledFor.In(loc).Format("2006-01-02 15:04") + " " + a.TimeZone
	}
	return a.ScheduledFor.Format("2006-01-02 15:04 -07:00")
}

// Body is the mail's text: what the file holds, and either that it is attached or,
// with baseURL, where to download it.
func Body(a Args, baseURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", a.Title)
	fmt.Fprintf(&b, "Report:     %s\n", a.Report)
	if p := paramsLine(a.Params, 0); p != "" {
		fmt.Fprintf(&b, "Parameters: %s\n", p)
	}
	if a.ScheduledFor != nil {
		fmt.Fprintf(&b, "Scheduled:  %s\n", scheduledAt(a))
	}
	fmt.Fprintf(&b, "Rows:       %d\n", a.Rows)
	fmt.Fprintf(&b, "File:       %s (%s)\n\n", a.DownloadName, humanSize(a.Size))
	switch {
	case baseURL == "" && a.Encrypted():
		b.WriteString("The file is attached, encrypted with a password, which this mail does not carry:\nask the schedule's owner for it.\n")
	case baseURL == "":
		b.WriteString("The file is attached.\n")
	case a.Encrypted() || a.EncryptRequired:
		id := url.PathEscape(a.ExportID)
		fmt.Fprintf(&b, "The file is too large to attach. Download it with a password from the export's page:\n%s/exports/%s\n", baseURL, id)
	default:
		id := url.PathEscape(a.ExportID)
		fmt.Fprintf(&b, "The file is too large to attach. Download it from:\n%s/api/v1/exports/%s/file\n\nor see the export at %s/exports/%s\n", baseURL, id, baseURL, id)
	}
	b.WriteString("\n-- \nSent by sheetq")
	if a.ScheduleID != "" {
		fmt.Fprintf(&b, " for schedule %s", a.ScheduleID)
	}
	b.WriteString(".\n")
	return b.String()
}

// paramsLine is "from=2026-11-01, to=2026-12-01", by name, each value cut to at most
// limit characters (0: whole).
func paramsLine(p map[string]any, limit int) string {
	parts := make([]string, 0, len(p))
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v := fmt.Sprint(p[k])
		if limit > 0 {
			v = cut(v, limit)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ", ")
}

// humanSize is "12.3 MB".
func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
