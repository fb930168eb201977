package store

import (
	"errors"
	"sync"
)

// writer runs the store's synchronous writes on one long-lived goroutine.
//
// # Notes
//
// SQLite here is C translated to Go, with deep call chains and large
// frames: every goroutine that writes first grows its stack to fit them.
// A batch writes from a new goroutine per run, so stack growth (copying)
// was about a tenth of a batch's CPU; one writer goroutine grows once. The
// writes go one at a time anyway: the write pool has one connection.
type writer struct {
	work chan func()
	done chan struct{}

	mu      sync.RWMutex // held (read) while sending to work, so stop never closes under a send
	stopped bool
}

func startWriter() *writer {
	w := &writer{work: make(chan func()), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for f := range w.work {
			f()
		}
	}()
	return w
}

// do runs fn on the writer goroutine and returns its error.
func (w *writer) do(fn func() error) error {
	errc := make(chan error, 1)
	w.mu.RLock()
	if w.stopped {
		w.mu.RUnlock()
		return errClosed
	}
	w.work <- func() { errc <- fn() }
	w.mu.RUnlock()
	return <-errc
}

// stop ends the writer once the writes queued before it are done.
func (w *writer) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.work)
	}
	w.mu.Unlock()
	<-w.done
}

var errClosed = errors.New("store: closed")
