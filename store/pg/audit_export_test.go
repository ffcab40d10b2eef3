package pg

// AuditQuery is AuditLog's statement and arguments, for its plan check.
var AuditQuery = auditQuery
