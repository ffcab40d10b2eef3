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

// GroupInserts is how many enqueue groups went in with one INSERT.
func GroupInserts(d *Store) int64 { return d.groupInserts.Load() }
