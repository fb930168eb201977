package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// writer runs the store's synchronous writes on one long-lived goroutine,
// and commits the writes queued at the same moment together.
//
// # Notes
//
// SQLite here is C translated to Go, with deep call chains and large
// frames: every goroutine that writes first grows its stack to fit them.
// A batch writes from a new goroutine per run, so stack growth (copying)
// was about a tenth of a batch's CPU; one writer goroutine grows once. The
// writes go one at a time anyway: the write pool has one connection. For
// the same reason the store's setup (migrations, prepared statements) and
// the queued events are written on this goroutine too: in a one-step run,
// three goroutines growing to SQLite's depth were 7 % of the process's CPU
// (issue 28).
//
// Group commit (issue 28): the writer takes the first write queued, then
// every other write already waiting (up to maxGroup), and runs them in one
// transaction; should one fail, the group is rolled back and each write
// runs again alone, so that the one that failed returns its error while
// the others commit (see commit). A write's
// caller is answered only after the COMMIT that holds its write: what was
// durable when the call returned still is. A batch's eight runs in flight
// queue their writes at the same moments (a step's start, its end, a run's
// end); one commit for all of them writes each shared page (the runs
// table, its indexes) to the WAL once instead of once per write. A lone
// run's writes come one at a time and commit as before.
type writer struct {
	db   *sql.DB
	work chan job
	done chan struct{}

	// setupErr is what the store's setup returned, set before the first
	// job is taken: when it is not nil, every job is answered with it.
	setupErr error

	mu      sync.RWMutex // held (read) while sending to work, so stop never closes under a send
	stopped bool

	commits atomic.Int64 // transactions committed (tests count them)
}

// job is one write: fn runs in the group's transaction; reply receives its
// error once the transaction is committed (or rolled back), or, for a
// write nobody waits for (post), report is called with it when it is not
// nil.
type job struct {
	fn     func(tx *sql.Tx) error
	reply  chan error
	report func(error)
}

func (j job) answer(err error) {
	if j.reply != nil {
		j.reply <- err
	} else if err != nil {
		j.report(err)
	}
}

// maxGroup bounds the writes committed together, so that a backlog does
// not hold SQLite's write lock (and other processes' writes) for long.
const maxGroup = 64

// startWriter starts the writer goroutine, which first runs setup (the
// store's migrations and prepared statements, which need SQLite's stack
// depth as much as a write does), then closes ready and takes the writes
// queued meanwhile. It does not wait for setup.
func startWriter(db *sql.DB, setup func() error, ready chan<- struct{}) *writer {
	w := &writer{db: db, work: make(chan job, maxGroup), done: make(chan struct{})}
	go func() {
		w.setupErr = setup()
		close(ready)
		w.run()
	}()
	return w
}

func (w *writer) run() {
	defer close(w.done)
	if w.setupErr != nil {
		for j := range w.work {
			j.answer(w.setupErr)
		}
		return
	}
	group := make([]job, 0, maxGroup)
	for j := range w.work {
		group = append(group[:0], j)
	drain:
		for len(group) < maxGroup {
			select {
			case j, ok := <-w.work:
				if !ok {
					break drain
				}
				group = append(group, j)
			default:
				break drain
			}
		}
		w.commit(group)
		clear(group) // let the closures go
	}
}

// commit runs a group of writes in one transaction and answers each. If
// one of them fails, the group is rolled back and each write runs again in
// a transaction of its own, as if they had been queued one at a time: the
// one that failed returns its error, the others commit. A write is only
// SQL on the transaction it is given (and reads), so running it again
// after a rollback does what running it once would have.
func (w *writer) commit(group []job) {
	if len(group) > 1 {
		tx, err := w.db.BeginTx(context.Background(), nil)
		if err != nil {
			err = fmt.Errorf("store: begin: %w", err)
			for _, j := range group {
				j.answer(err)
			}
			return
		}
		if w.runAll(tx, group) == nil {
			for _, j := range group {
				j.answer(nil)
			}
			return
		}
	}
	for _, j := range group {
		j.answer(w.alone(j.fn))
	}
}

// runAll runs the group's writes in tx and commits it; on the first error
// it rolls tx back.
func (w *writer) runAll(tx *sql.Tx, group []job) error {
	for _, j := range group {
		if err := j.fn(tx); err != nil {
			tx.Rollback()
			return err
		}
	}
	return w.commitTx(tx)
}

// alone runs one write in a transaction of its own.
func (w *writer) alone(fn func(tx *sql.Tx) error) error {
	tx, err := w.db.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return w.commitTx(tx)
}

func (w *writer) commitTx(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	w.commits.Add(1)
	return nil
}

// do runs fn in a write transaction on the writer goroutine and returns
// its error once the write is committed (or not).
func (w *writer) do(fn func(tx *sql.Tx) error) error {
	errc := make(chan error, 1)
	if !w.send(job{fn: fn, reply: errc}) {
		return errClosed
	}
	return <-errc
}

// post queues fn like do but does not wait for it: report is called with
// its error, if any, from the writer goroutine (so it must not block on
// the store). A write done after it, waited for, is committed after it.
func (w *writer) post(fn func(tx *sql.Tx) error, report func(error)) {
	if !w.send(job{fn: fn, report: report}) {
		report(errClosed)
	}
}

func (w *writer) send(j job) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.stopped {
		return false
	}
	w.work <- j
	return true
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
