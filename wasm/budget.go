package wasm

import (
	"context"
	"sync"
)

// memoryBudget is a weighted semaphore of bytes: the instances in flight
// on a host take their module's memory limit from it and give it back when
// they end. Waiters are served in order, so a call of a large module is
// not starved by a stream of small ones.
type memoryBudget struct {
	mu      sync.Mutex
	total   uint64
	free    uint64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     uint64
	ready chan struct{} // closed when the bytes are the waiter's
}

func newMemoryBudget(total uint64) *memoryBudget {
	return &memoryBudget{total: total, free: total}
}

// weight is what a call of a module with this memory limit takes: its
// limit, or the whole budget when the limit is larger, so that it can
// still run (alone).
func (b *memoryBudget) weight(limit uint64) uint64 { return min(limit, b.total) }

// tryAcquire takes n bytes if they are free and nobody waits before it.
func (b *memoryBudget) tryAcquire(n uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		return true
	}
	return false
}

// acquire takes n bytes, waiting in line until they are free or ctx ends.
func (b *memoryBudget) acquire(ctx context.Context, n uint64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted while giving up: hand the bytes on
		b.free += n
		b.grant()
	default:
		for i, other := range b.waiters {
			if other == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grant() // w may have been the head that held the others back
	}
	return ctx.Err()
}

// release gives n bytes back and wakes the waiters they let in.
func (b *memoryBudget) release(n uint64) {
	b.mu.Lock()
	b.free += n
	b.grant()
	b.mu.Unlock()
}

// grant hands free bytes to the waiters at the head of the line, in order.
// b.mu is held.
func (b *memoryBudget) grant() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
