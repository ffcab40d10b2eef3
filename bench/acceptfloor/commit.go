package main

import (
	"fmt"
	"os"
)

// ringSize is the overwrite mode's preallocated file, the size of a WAL that
// checkpoints every few hundred jobs, with room to spare.
const ringSize = 64 << 20

// committer writes and fsyncs the bytes of every request that arrived while the last
// fsync ran in one go, and then answers them all: a group commit.
type committer struct {
	f    *os.File
	mode string
	per  int
	buf  []byte
	off  int64 // overwrite: where the next batch goes
	reqs chan chan error
	done chan struct{}
}

// newCommitter opens the file for mode ("off" gives nil: nothing to commit).
func newCommitter(mode, dir string, per int) (*committer, error) {
	switch mode {
	case "off":
		return nil, nil
	case "append", "overwrite":
	default:
		return nil, fmt.Errorf("-sync %q: want off, append or overwrite", mode)
	}
	if per <= 0 || per > ringSize/64 {
		return nil, fmt.Errorf("-bytes %d: want 1 to %d", per, ringSize/64)
	}
	f, err := os.CreateTemp(dir, "acceptfloor-*.wal")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // gone when closed; the open file is still written and synced
	c := &committer{f: f, mode: mode, per: per, reqs: make(chan chan error, 4096), done: make(chan struct{})}
	if mode == "overwrite" {
		zero := make([]byte, 1<<20)
		for i := 0; i < ringSize; i += len(zero) {
			if _, err := f.Write(zero); err != nil {
				f.Close()
				return nil, err
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	go c.loop()
	return c, nil
}

// commit returns once this request's bytes are written and fsynced.
func (c *committer) commit() error {
	done := make(chan error, 1)
	c.reqs <- done
	return <-done
}

func (c *committer) loop() {
	defer close(c.done)
	for first := range c.reqs {
		batch := []chan error{first}
	gather:
		for len(batch) < cap(c.reqs) {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		err := c.write(len(batch) * c.per)
		for _, r := range batch {
			r <- err
		}
	}
}

// write puts n bytes at the end of the file (append) or at the ring's next place
// (overwrite), and fsyncs the file, as SQLite commits a WAL with synchronous=FULL.
func (c *committer) write(n int) error {
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	b := c.buf[:n]
	var err error
	if c.mode == "append" {
		_, err = c.f.Write(b)
	} else {
		if c.off+int64(n) > ringSize {
			c.off = 0
		}
		_, err = c.f.WriteAt(b, c.off)
		c.off += int64(n)
	}
	if err != nil {
		return err
	}
	return c.f.Sync()
}

// close stops the loop once it has answered every request it took, and closes the
// file. The server is closed first, so no request arrives after.
func (c *committer) close() {
	if c == nil {
		return
	}
	close(c.reqs)
	<-c.done
	c.f.Close()
}
