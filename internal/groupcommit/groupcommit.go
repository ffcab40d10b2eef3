// Package groupcommit gathers concurrent calls into groups that are committed one group
// at a time, for the stores' Enqueue (ARCHITECTURE.md, rule 17): a call that finds no
// commit running commits its own group on its own goroutine, so a lone call pays no
// hand-off; calls that come while a commit is in flight wait and go together in the
// next group, which a committer goroutine takes while calls keep coming. There is no
// timer: a group forms only while a commit is in flight, and an idle queue holds no
// goroutine.
package groupcommit

import (
	"context"
	"sync"
)

// Queue holds the calls (*C) waiting for their group. commit must answer every call of
// the group it is given (so that the call's done channel is closed) before it returns.
type Queue[C any] struct {
	max       int
	closedErr error
	commit    func(group []*C)

	mu         sync.Mutex
	queue      []*C
	committing bool           // a group is being committed, by a caller or the committer
	closed     bool           // Close has begun: no more calls are taken
	running    sync.WaitGroup // the commit in flight, for Close
}

// New returns a queue whose groups hold at most max calls (128 when max <= 0), that
// answers calls made after Close with closedErr.
func New[C any](max int, closedErr error, commit func(group []*C)) *Queue[C] {
	if max <= 0 {
		max = 128
	}
	return &Queue[C]{max: max, closedErr: closedErr, commit: commit}
}

// Do queues c and returns once the group that holds it is committed (nil: commit has
// answered c). If ctx ends while c still waits in the queue, c is dropped, never
// committed, and ctx's error returned; once c's group is taken, Do waits for the real
// outcome, so an error never hides a committed call.
func (q *Queue[C]) Do(ctx context.Context, c *C, done <-chan struct{}) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return q.closedErr
	}
	q.queue = append(q.queue, c)
	if !q.committing {
		// Nothing in flight, so the queue held nothing before c: commit c's group here.
		q.committing = true
		q.running.Add(1)
		q.mu.Unlock()
		q.lead()
		return nil
	}
	q.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, w := range q.queue {
		if w == c {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			q.mu.Unlock()
			return ctx.Err()
		}
	}
	q.mu.Unlock()
	<-done // already taken into a group
	return nil
}

// More removes up to n calls that came while the group being committed was under way,
// for a commit that takes them into its own group before it ends (its COMMIT), so that
// a write that arrives while the statements of the others run still makes their fsync.
// The commit must answer them as it answers its group; nil when none waits. Only the
// commit function may call it.
func (q *Queue[C]) More(n int) []*C {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(len(q.queue), n)
	if n <= 0 {
		return nil
	}
	more := make([]*C, n)
	copy(more, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	return more
}

// Max is the most calls one group holds.
func (q *Queue[C]) Max() int { return q.max }

// Waiting is how many calls wait for the next group.
func (q *Queue[C]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Close refuses new calls and waits until the calls already queued are answered.
func (q *Queue[C]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.running.Wait()
}

// lead commits the first group, which holds its caller's call, then leaves the calls
// that came meanwhile to a committer goroutine, so that the caller returns as soon as
// its own group is committed.
func (q *Queue[C]) lead() {
	q.commit(q.take())
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) > 0 {
		go q.run() // takes over q.running's count and q.committing
		return
	}
	q.committing = false
	q.running.Done()
}

// run commits groups until the queue is empty.
func (q *Queue[C]) run() {
	defer q.running.Done()
	for {
		group := q.take()
		if group == nil {
			return
		}
		q.commit(group)
	}
}

// take removes the next group from the queue; nil, with committing cleared, when the
// queue is empty.
func (q *Queue[C]) take() []*C {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.queue), q.max)
	if n == 0 {
		q.committing = false
		return nil
	}
	group := make([]*C, n)
	copy(group, q.queue)
	// Shift rather than reslice so the backing array does not grow without bound.
	q.queue = append(q.queue[:0], q.queue[n:]...)
	return group
}
