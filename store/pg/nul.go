package pg

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
)

// Values PostgreSQL cannot keep (issue 36). Its text cannot hold a NUL character: a
// parameter that has one is refused (22021), so a statement that carries one fails every
// time. Its json type takes a string with the escape \u0000, or with half of a UTF-16
// surrogate pair (\ud800 alone), as it is, but no operator can read a value out of such
// a document as text: ->> fails on the whole document (22P05, 22P02), and with it the
// partial index jobs_final_report (migration 0004), which every UPDATE that makes a job
// final evaluates. A job whose args held one could never end, and held its worker and
// every node's start. So the store refuses both before they are written, with
// store.ErrUnstorable; migration 0011 repairs the rows earlier versions stored.

// unreadableJSON reports whether some string of the JSON document b is one PostgreSQL
// cannot give back as text: it holds a NUL (the escape \u0000, or a raw 0x00, which JSON
// does not allow anyway), or a surrogate escape that is not half of a pair. Backslashes
// stand only inside strings in JSON, so a scan of the escapes needs no parser; an
// escape that is not JSON is left to the server to refuse.
func unreadableJSON(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case 0:
			return true
		case '\\':
			r, ok := uEscape(b, i)
			switch {
			case !ok:
				i++ // \" \\ \n ...: the escaped byte is no escape of its own
			case r == 0:
				return true
			case r >= 0xDC00 && r <= 0xDFFF:
				return true // a low surrogate with no high one before it
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := uEscape(b, i+6)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 11 // the pair
			default:
				i += 5
			}
		}
	}
	return false
}

// uEscape reads the escape \uXXXX at b[i:]; ok is false when there is none.
func uEscape(b []byte, i int) (r rune, ok bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	for _, c := range b[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// CheckJob refuses a job whose text the store could not keep or whose args it could not
// read back (store.ErrUnstorable), before the job joins a group: one such job would
// otherwise fail its whole statement (store.JobChecker).
func (s *Store) CheckJob(nj store.NewJob) error { return checkNewJobText(nj) }

// checkNewJobText is CheckJob, for FireSchedule's job too.
func checkNewJobText(nj store.NewJob) error {
	if hasNUL(nj.ID, nj.Kind, nj.Queue, nj.IdempotencyKey, nj.RequestHash, nj.NotifyURL, nj.CreatedBy) {
		return fmt.Errorf("enqueue: a text field %w", store.ErrUnstorable)
	}
	if unreadableJSON(nj.Args) {
		return fmt.Errorf("enqueue: args %w", store.ErrUnstorable)
	}
	return nil
}

// unstorable marks err as store.ErrUnstorable when the server refused a value of the
// statement (SQLSTATE class 22, data exception: a NUL in a text parameter, a json
// string that cannot be read as text, a number out of range): the same statement would
// be refused again, so the engine must not retry it forever. Other errors are returned
// as they are.
func unstorable(err error) error {
	var pe *pgconn.PgError
	if err == nil || errors.Is(err, store.ErrUnstorable) || !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnstorable, err)
}

// withoutNUL is res with its warnings through noNUL: a warning may quote a value of the
// source's data, and the job's warnings reach its follow-ups' args (a webhook's
// payload), which must be readable (followUpsTx). res's slice is not changed.
func withoutNUL(res store.FileResult) store.FileResult {
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.IndexByte(w, 0) >= 0 }) {
		return res
	}
	ws := make([]string, len(res.Warnings))
	for i, w := range res.Warnings {
		ws[i] = noNUL(w)
	}
	res.Warnings = ws
	return res
}

// noNUL is s with every NUL replaced by U+FFFD: for text the store writes on a job's
// behalf (an attempt's error message, a recovery's reason), which may quote a value
// that held one. Refusing it would leave the attempt's end unrecorded.
func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
