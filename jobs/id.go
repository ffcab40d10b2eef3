package jobs

import "sheetq/store"

// NewID returns a new job id: opaque, unguessable, and in creation order (store.NewID).
func NewID() string { return store.NewID() }
