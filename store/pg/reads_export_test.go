package pg

// ListQuery is List's statement and arguments, for the plan checks of pg_test.
var ListQuery = listQuery

// FiringsQuery is ScheduleFirings' statement, for its plan check.
const FiringsQuery = firingsQuery

// PendingHeadQuery is PendingHead's statement, for its plan check.
const PendingHeadQuery = pendingHeadQuery
