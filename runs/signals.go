package runs

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
)

// Interruptible is the signal ladder of every command that runs: a
// context that the first SIGINT or SIGTERM cancels with
// engine.ErrInterrupted (each local step tears down with its graces; a
// remote backend stops waiting), after calling first (nil: nothing); a
// second sends SIGKILL to every agent's process group this process
// started, at once. stop ends it.
func Interruptible(parent context.Context, first func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-ch:
				n++
				if n > 1 {
					procgroup.KillAll()
					continue
				}
				if first != nil {
					first()
				}
				cancel(engine.ErrInterrupted)
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}
