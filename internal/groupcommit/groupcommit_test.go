package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

type call struct {
	n    int
	done chan struct{}
}

var errClosed = errors.New("closed")

// Calls that arrive while a group commits go together in the next group; a call whose
// context ends while it waits is dropped and never committed; after Close, calls are
// refused.
func TestGroupsDropsAndCloses(t *testing.T) {
	var mu sync.Mutex
	var groups [][]int
	inFirst, release := make(chan struct{}), make(chan struct{})
	q := New(2, errClosed, func(g []*call) {
		mu.Lock()
		first := len(groups) == 0
		var ns []int
		for _, c := range g {
			ns = append(ns, c.n)
		}
		groups = append(groups, ns)
		mu.Unlock()
		if first {
			close(inFirst)
			<-release
		}
		for _, c := range g {
			close(c.done)
		}
	})
	do := func(ctx context.Context, n int) error {
		c := &call{n: n, done: make(chan struct{})}
		return q.Do(ctx, c, c.done)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := do(context.Background(), 1); err != nil {
			t.Error(err)
		}
	})
	<-inFirst // call 1 commits its own group on its goroutine
	ctx, cancel := context.WithCancel(context.Background())
	dropped := make(chan error, 1)
	go func() { dropped <- do(ctx, 2) }()
	for q.Waiting() < 1 { // call 2 queued behind the commit in flight
		runtime.Gosched()
	}
	for _, n := range []int{3, 4} {
		wg.Go(func() {
			if err := do(context.Background(), n); err != nil {
				t.Error(err)
			}
		})
	}
	for q.Waiting() < 3 {
		runtime.Gosched()
	}
	cancel()
	if err := <-dropped; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context ended in the queue: %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	q.Close()
	if err := do(context.Background(), 5); !errors.Is(err, errClosed) {
		t.Fatalf("after Close: %v, want the closed error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(groups) != 2 || len(groups[0]) != 1 || groups[0][0] != 1 || len(groups[1]) != 2 {
		t.Fatalf("groups %v, want [[1] [3 4]] (in either order within the second)", groups)
	}
	for _, n := range groups[1] {
		if n == 2 {
			t.Fatalf("the dropped call was committed: %v", groups)
		}
	}
}

// A commit that asks for More before it ends takes the calls that came while it ran, up
// to the number asked for, and answers them; the rest go in the next group.
func TestMoreTakesLateCallsIntoTheGroup(t *testing.T) {
	var mu sync.Mutex
	var groups [][]int
	inFirst, release := make(chan struct{}), make(chan struct{})
	var q *Queue[call]
	q = New(3, errClosed, func(g []*call) {
		mu.Lock()
		first := len(groups) == 0
		mu.Unlock()
		if first {
			close(inFirst)
			<-release
			g = append(g, q.More(q.Max()-len(g))...)
		}
		var ns []int
		for _, c := range g {
			ns = append(ns, c.n)
			close(c.done)
		}
		mu.Lock()
		groups = append(groups, ns)
		mu.Unlock()
	})
	do := func(n int) {
		c := &call{n: n, done: make(chan struct{})}
		if err := q.Do(context.Background(), c, c.done); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { do(1) })
	<-inFirst
	for n := 2; n <= 4; n++ {
		wg.Go(func() { do(n) })
		for q.Waiting() < n-1 { // sent in order, each once the one before is queued
			runtime.Gosched()
		}
	}
	close(release)
	wg.Wait()
	q.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(groups) != 2 || len(groups[0]) != 3 || groups[0][1] != 2 || groups[0][2] != 3 || len(groups[1]) != 1 || groups[1][0] != 4 {
		t.Fatalf("groups %v, want [[1 2 3] [4]]: More takes two late calls in order, the third waits", groups)
	}
	if q.More(1) != nil {
		t.Fatal("More of an empty queue returned calls")
	}
}
