package export

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
)

// RemoteFiles is where an export keeps its checkpointed rows for an attempt on another
// node: a bucket the nodes share (jobs.BucketPieces). Pieces are written once each,
// under keys of their own, and read back in the order a checkpoint lists them.
type RemoteFiles interface {
	Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	List(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, key string) error
}

// piece is one upload of a rows file: the bytes from the end of the piece before it
// (or 0) to To, by attempt A. Its key names both ends and the attempt, so that a piece
// an attempt uploaded after its last checkpoint never stands in for another's.
type piece struct {
	A  int   `json:"a"`
	To int64 `json:"to"`
}

// maxPieces is how many pieces a sheet's list holds before the next upload sends the
// whole file as one: with a checkpoint every 5 s, a re-upload every ten minutes, and a
// checkpoint of a few KiB however long the export runs.
const maxPieces = 128

func pieceKey(prefix string, sheet int, from int64, p piece) string {
	return prefix + "sheet" + strconv.Itoa(sheet) + "/a" + strconv.Itoa(p.A) + "-" +
		strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(p.To, 10) + ".z"
}

// upload sends what of sheet's rows file, up to comp, is not in the bucket yet, as one
// piece, and returns the pieces the checkpoint lists. A failed upload is logged and
// left for the next checkpoint: the checkpoint still serves this node, and another node
// starts over only if it needs what is missing.
func (x *xlsxWriter) upload(sheet int, f *os.File, comp int64, pieces *[]piece) []piece {
	var from int64
	if n := len(*pieces); n >= maxPieces {
		// The list would make the checkpoint grow without end: the file so far goes up
		// as one piece instead (the others stay until the job ends).
		*pieces = (*pieces)[:0]
	} else if n > 0 {
		from = (*pieces)[n-1].To
	}
	if comp > from {
		p := piece{A: x.opt.attempt, To: comp}
		key := pieceKey(x.opt.remotePrefix, sheet, from, p)
		if err := x.opt.remote.Put(x.ctx, key, io.NewSectionReader(f, from, comp-from), comp-from); err != nil {
			slog.Default().Warn("export: checkpointed rows not uploaded; another node would start over", "key", key, "err", err)
		} else {
			*pieces = append(*pieces, p)
		}
	}
	return append([]piece(nil), *pieces...)
}

// openRows opens sheet's rows file as mark m says, checked and cut back to the mark:
// this node's own file, or, when that is missing or does not match, the file made
// again from the bucket's pieces.
func (x *xlsxWriter) openRows(sheet int, m sheetMark) (*os.File, []byte, error) {
	path := x.opt.resumePath(sheet)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		dict, cerr := checkRows(f, m)
		if cerr == nil {
			cerr = cut(f, m.Comp)
		}
		if cerr == nil {
			return f, dict, nil
		}
		f.Close()
		err = cerr
	}
	if x.opt.remote == nil {
		return nil, nil, err
	}
	local := err
	if err := os.MkdirAll(x.opt.resumeDir, 0o700); err != nil {
		return nil, nil, err
	}
	if f, err = os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600); err != nil {
		return nil, nil, err
	}
	var from int64
	for _, p := range m.Pieces {
		if err = x.fetch(f, pieceKey(x.opt.remotePrefix, sheet, from, p), p.To-from); err != nil {
			break
		}
		if from = p.To; from >= m.Comp {
			break
		}
	}
	if err == nil && from < m.Comp {
		err = fmt.Errorf("the bucket holds %d of its %d bytes", from, m.Comp)
	}
	var dict []byte
	if err == nil {
		if dict, err = checkRows(f, m); err == nil {
			err = cut(f, m.Comp)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("not on this node (%v), nor whole in the bucket: %w", local, err)
	}
	slog.Default().Info("export: checkpointed rows read from the bucket", "sheet", sheet, "bytes", m.Comp)
	return f, dict, nil
}

// fetch appends the piece under key, size bytes, to f.
func (x *xlsxWriter) fetch(f *os.File, key string, size int64) error {
	rc, err := x.opt.remote.Get(x.ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(f, io.LimitReader(rc, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("%s holds %d bytes, not %d", key, n, size)
	}
	return err
}

// cut drops what f holds after comp, and leaves f at its end, where the rows continue.
func cut(f *os.File, comp int64) error {
	if err := f.Truncate(comp); err != nil {
		return err
	}
	_, err := f.Seek(comp, io.SeekStart)
	return err
}

// removeRemote removes the job's pieces from the bucket.
func removeRemote(ctx context.Context, r RemoteFiles, prefix string) error {
	keys, err := r.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
