package store

import (
	crand "crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// NewID returns an opaque, unguessable job id: 26 characters from [2-7a-z] that encode
// the creation time in milliseconds (48 bits) followed by 80 random bits.
//
// The time goes first so that ids sort in the order they were made. SQLite keeps the
// jobs' primary key and the events' job index as B-trees ordered by id, and a random id
// lands on a random leaf page: every accepted job rewrote two pages nobody else touched,
// and the checkpoint that copies the write-ahead log into the database copied hundreds
// of such pages each time, holding up every commit behind it. Ids in creation order
// append to the last leaf instead, which the jobs accepted together share
// (BENCHMARKS.md: the checkpoints' pauses halved, and requests slower than 5 ms in a
// burst fell by two thirds). Eighty random bits are as unguessable as a link needs to be.
func NewID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = crand.Read(b[6:]) // never fails (crypto/rand)
	return idEncoding.EncodeToString(b[:])
}

// idEncoding is base32 with its alphabet in byte order, so that comparing two ids as
// strings (as SQLite's BINARY collation does) compares the numbers they encode.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)
