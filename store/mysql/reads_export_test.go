package mysql

// The statements of the listings, for the plan tests.
var (
	ListQuery  = listQuery
	AuditQuery = auditQuery
)

const (
	FiringsQuery     = firingsQuery
	PendingHeadQuery = pendingHeadQuery
)
