package apiv1

import "time"

// AuditEntry is one entry of the audit log as GET /api/v1/audit shows it (issue 39).
// "" is a field the entry does not have (a sign-in names no export).
type AuditEntry struct {
	// At is when it happened, in UTC.
	At time.Time `json:"at"`
	// Actor is the token's or the person's name, never a secret; Action what was done.
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Job    string `json:"job"`
	Report string `json:"report"`
	// IP is the client's address, as seen through trusted proxies.
	IP     string `json:"ip"`
	Detail string `json:"detail"`
}

// AuditPage is a page of the audit log, newest first. NextCursor, when set, is the
// ?cursor= of the page after it.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}
