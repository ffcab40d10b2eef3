package client

import "sheetq/internal/apiv1"

// Job is an export as the API returns it: the server's own shape (internal/apiv1), so
// a field cannot drift between the two.
type Job = apiv1.Job
