package store

// JobFile is what `sheetq doctor` needs to know of a job to match it with files.
type JobFile struct {
	ID       string
	Status   Status
	Attempt  int
	FileName string // "" when no file was published
	// FileSize and FileSHA256 are what was recorded of the published file.
	FileSize   int64
	FileSHA256 string
}

// Health is what a server driver's Diagnose (store/pg, store/mysql) found in its job
// store, for `sheetq doctor`.
type Health struct {
	// Server is the server's version string.
	Server string
	// Schema is the newest migration applied (0: none), Want the newest this build has.
	Schema, Want int
	// Files is every job's file record, for matching with the file store (empty when
	// the schema is missing or not this build's).
	Files []JobFile
	// Problems are what is wrong, one line each; none is healthy.
	Problems []string
}
