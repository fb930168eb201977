package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
)

// errOutputClosed is the cause with which a command is cancelled when its
// stdout went away (`acpflow run --json | head -5`): its runs are torn down
// and recorded as failed with this error, and the command exits 1.
var errOutputClosed = errors.New("stdout was closed")

// commandContext is the context every command runs in. SIGHUP (the terminal
// was closed) cancels it with engine.ErrInterrupted, as SIGINT and SIGTERM
// cancel a run's (see runcmd.Interruptible): each step tears down, the run is
// recorded, and acpflow exits 130; a second SIGHUP kills every agent's group
// at once. A write to stdout that fails cancels it with errOutputClosed.
//
// # Notes
//
// SIGPIPE is caught, never ignored: Go kills a process whose write to fd 1
// or 2 meets a closed pipe unless SIGPIPE is handled, and a handled signal,
// unlike an ignored one, is back to its default in the agents acpflow execs.
// A SIGHUP that was already ignored (nohup) stays ignored.
func commandContext(parent context.Context, stdout io.Writer) (context.Context, *outputGuard, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	out := &outputGuard{w: stdout, closed: func(err error) { cancel(fmt.Errorf("%w (%v): the run was stopped", errOutputClosed, err)) }}
	done := make(chan struct{})
	hup := make(chan os.Signal, 2)
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(hup, syscall.SIGHUP)
	}
	go func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-hup:
				if n == 1 {
					fmt.Fprintln(os.Stderr, "acpflow: hangup: cancelling steps (again to kill now)")
					cancel(engine.ErrInterrupted)
				} else {
					procgroup.KillAll()
				}
			}
		}
	}()
	return ctx, out, func() {
		signal.Stop(hup)
		close(done)
		cancel(nil)
	}
}

// outputGuard is the commands' stdout. Once a write fails (the reader went
// away: EPIPE; the terminal hung up: EIO), nothing more is written and the
// command is cancelled, so that its runs are torn down and recorded rather
// than run on with nobody reading, or killed by SIGPIPE midway.
type outputGuard struct {
	mu     sync.Mutex
	w      io.Writer
	err    error
	closed func(error)
}

func (g *outputGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return len(p), nil
	}
	n, err := g.w.Write(p)
	if err == nil {
		g.mu.Unlock()
		return n, nil
	}
	g.err = err
	g.mu.Unlock()
	g.closed(err)
	return n, err
}

// failed is the write error that closed the output, if any.
func (g *outputGuard) failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Fd is the file descriptor of the stdout it guards, so that the views can
// tell a terminal.
func (g *outputGuard) Fd() uintptr {
	if f, ok := g.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}
