package store

import (
	"context"
	"errors"
	"fmt"
)

// MaxCheckpoint bounds a checkpoint: a job kind's note of how far its source and file
// got (ARCHITECTURE.md, "Checkpoints and resume"), not the file itself.
const MaxCheckpoint = 256 << 10

// ErrCheckpointTooLarge refuses a checkpoint over MaxCheckpoint; nothing is written.
var ErrCheckpointTooLarge = errors.New("checkpoint larger than 256 KiB")

// SaveCheckpoint stamps a running attempt's heartbeat and progress and replaces its job's
// checkpoint with data, fenced as Heartbeat is (rules 3, 30): an attempt that lost its
// lease gets ErrLeaseLost and writes nothing. Empty data clears the checkpoint.
func (s *Store) SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error) {
	if len(data) > MaxCheckpoint {
		return false, fmt.Errorf("job %s: %w (%d bytes)", id, ErrCheckpointTooLarge, len(data))
	}
	if len(data) == 0 {
		data = nil
	}
	c, err := s.d.SaveCheckpoint(ctx, id, attempt, rows, total, data)
	return c, s.fault(err)
}
