package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/internal/termtext"
)

// Main runs root, the command tree of an acpflow binary (acpflow,
// acpflow-temporal), on args and returns the process's exit code. Every
// binary's main is this function, so that the same error exits with the
// same code whichever binary met it (docs/results.md#exit-codes): usage
// errors cobra finds are coded 2 (UsageErrors), an error nobody coded is
// a failure (Code), a command whose stdout was cut short did not do what
// was asked, and the error goes to stderr as "NAME: message", once.
func Main(root *cobra.Command, name string, args []string) int {
	UsageErrors(root)
	root.SetArgs(args)
	ctx, stdout, stop := CommandContext(context.Background(), name, os.Stdout)
	defer stop()
	root.SetOut(stdout)
	ran, err := root.ExecuteContextC(ctx)
	// Sandbox launchers started ahead for steps that never came: they
	// would end with acpflow anyway, but not before it exits.
	sandbox.DismissWaiting()
	return finish(os.Stderr, name, root, ran, err, stdout.Failed())
}

// finish is the exit code of a command line that ran the command ran and
// ended in err, outErr the error that cut its stdout short (nil: none);
// err is reported on stderr unless it was already.
func finish(stderr io.Writer, name string, root, ran *cobra.Command, err, outErr error) int {
	if err != nil {
		err = unknownCommand(root, ran, err)
	}
	if err == nil && outErr != nil {
		err = &ExitError{Code: ExitFailed, Err: fmt.Errorf("stdout: %w", outErr)}
	}
	if err == nil {
		return ExitOK
	}
	var ce *ExitError
	if !errors.As(err, &ce) || !ce.Silent {
		// An error may quote an agent (its stderr, its JSON-RPC error).
		fmt.Fprintln(stderr, name+": "+termtext.Sanitize(err.Error()))
	}
	return Code(err)
}

// Code is the code an error exits with: its own, else 1. *ExitError
// carries the code from where an error is found; usage errors carry
// ExitUsage from there, cobra's included (UsageErrors). An error nobody
// coded is a failure, not bad usage.
func Code(err error) int {
	if err == nil {
		return ExitOK
	}
	var ce *ExitError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ExitFailed
}

// UsageErrors makes the errors cobra finds in a command line under root
// usage errors (exit 2): a flag it cannot parse (for root and every
// command below, which inherit root's flag error function; flagError) and a wrong
// argument count (each command's Args); one coded already (Args) keeps its
// code. An unknown command is coded by Main (unknownCommand).
func UsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	usageArgs(root)
}

// flagError is the usage error of a command line whose flags c could not
// parse: an unknown --flag gets the closest flag of c, as an unknown key
// or command does ("unknown flag: --inptu; did you mean --input?"); cobra
// suggests commands only.
func flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedShortnames() != "" {
		return UsageError(err)
	}
	var names []string
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
	}
	if s := suggest.Closest(ne.GetSpecifiedName(), names); s != "" {
		return UsageError(fmt.Errorf("%w; did you mean --%s?", err, s))
	}
	return UsageError(fmt.Errorf("%w (%s --help lists its flags)", err, c.CommandPath()))
}

// usageArgs makes the argument check of cmd and of each of its
// subcommands (cobra's Args validators) return a usage error.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				var coded *ExitError
				if errors.As(err, &coded) {
					return err
				}
				return UsageError(err)
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// unknownCommand makes the error of a command line that names no command a
// usage error. The root runs nothing itself, so the only error that comes
// back naming it is cobra's check that its first word is a command (which
// cobra runs while finding the command, before any Args validator); its
// flag errors are coded already (UsageErrors).
func unknownCommand(root, ran *cobra.Command, err error) error {
	var ce *ExitError
	if ran == root && !errors.As(err, &ce) {
		return UsageError(err)
	}
	return err
}

// errOutputClosed is the cause with which a command is cancelled when its
// stdout went away (`acpflow run --json | head -5`): its runs are torn down
// and recorded as failed with this error, and the command exits 1.
var errOutputClosed = errors.New("stdout was closed")

// CommandContext is the context every command runs in. SIGHUP (the
// terminal was closed) cancels it with engine.ErrInterrupted, as SIGINT and
// SIGTERM cancel a run's (see Interruptible): each step tears down, the run
// is recorded, and the command exits 130; a second SIGHUP kills every
// agent's group at once. A write to stdout (the OutputGuard returned) that
// fails cancels it with errOutputClosed. name prefixes what it says.
//
// # Notes
//
// SIGPIPE is caught, never ignored: Go kills a process whose write to fd 1
// or 2 meets a closed pipe unless SIGPIPE is handled, and a handled signal,
// unlike an ignored one, is back to its default in the agents acpflow execs.
// A SIGHUP that was already ignored (nohup) stays ignored.
func CommandContext(parent context.Context, name string, stdout io.Writer) (context.Context, *OutputGuard, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	out := &OutputGuard{w: stdout, closed: func(err error) { cancel(fmt.Errorf("%w (%v): the run was stopped", errOutputClosed, err)) }}
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
					fmt.Fprintln(os.Stderr, name+": hangup: cancelling steps (again to kill now)")
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

// OutputGuard is the commands' stdout. Once a write fails (the reader went
// away: EPIPE; the terminal hung up: EIO), nothing more is written and the
// command is cancelled, so that its runs are torn down and recorded rather
// than run on with nobody reading, or killed by SIGPIPE midway.
type OutputGuard struct {
	mu     sync.Mutex
	w      io.Writer
	err    error
	closed func(error)
}

func (g *OutputGuard) Write(p []byte) (int, error) {
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

// Failed is the write error that closed the output, if any.
func (g *OutputGuard) Failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Fd is the file descriptor of the stdout it guards, so that the views can
// tell a terminal.
func (g *OutputGuard) Fd() uintptr {
	if f, ok := g.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}
