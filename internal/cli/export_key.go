package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sheetq/internal/client"
)

// pendingKeyAge is how long an interrupted export request is resumed by an identical
// command; after that the same command asks for a new export.
const pendingKeyAge = 24 * time.Hour

// pendingKey is the Idempotency-Key of one export request, kept on disk until the
// command sees the request through, so that a command killed midway and run again
// (same server, report and parameters) reattaches to the export it started instead of
// making a second one.
type pendingKey struct {
	Key     string
	path    string // empty when it could not be stored: the key then lives only in memory
	Resumed bool
}

// loadPendingKey returns the stored key of an unfinished identical request, or a new one.
// The file's format is part of the request: the same report in another format is a
// new export, never a resumed one (which the server would refuse as a reused key).
func loadPendingKey(server string, req client.ExportRequest) pendingKey {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", strings.TrimRight(server, "/"), req.Report)
	for _, name := range slices.Sorted(maps.Keys(req.Params)) {
		fmt.Fprintf(h, "%s=%s\x00", name, req.Params[name])
	}
	// Left out for the default, so that a key stored before formats is still found.
	if req.Format != "" && req.Format != "xlsx" {
		fmt.Fprintf(h, "format=%s\x00", req.Format)
	}
	if req.BOM {
		fmt.Fprint(h, "bom\x00")
	}
	// Kept formulas are another file; naming the default, neutralise, is not.
	if req.CSVFormulas == "keep" {
		fmt.Fprint(h, "csv_formulas=keep\x00")
	}
	pk := pendingKey{Key: rand.Text()}
	dir, err := os.UserCacheDir()
	if err != nil {
		return pk
	}
	pk.path = filepath.Join(dir, "sheetq", "pending", hex.EncodeToString(h.Sum(nil))[:32]+".key")
	if fi, err := os.Stat(pk.path); err == nil && time.Since(fi.ModTime()) < pendingKeyAge {
		if b, err := os.ReadFile(pk.path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			pk.Key, pk.Resumed = strings.TrimSpace(string(b)), true
			return pk
		}
	}
	if err := os.MkdirAll(filepath.Dir(pk.path), 0o700); err != nil {
		pk.path = ""
		return pk
	}
	if err := os.WriteFile(pk.path, []byte(pk.Key+"\n"), 0o600); err != nil {
		pk.path = ""
	}
	return pk
}

// done forgets the key: the request has been seen through (or refused), so the same
// command run again is a new request.
func (pk pendingKey) done() {
	if pk.path != "" {
		_ = os.Remove(pk.path)
	}
}
