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
