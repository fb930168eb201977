package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes are API (docs/results.md#exit-codes): one place defines them, typed errors carry
// them, and execute maps an error to its code.
const (
	exitOK          = 0
	exitFailed      = 1   // at least one run failed
	exitUsage       = 2   // bad usage, invalid workflow, policy or input: nothing started
	exitInterrupted = 130 // SIGINT/SIGTERM, after every child was torn down
)

// codedError carries an exit code.
type codedError struct {
	code   int
	err    error
	silent bool // already reported (e.g. by the run view)
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func usageError(err error) error { return &codedError{code: exitUsage, err: err} }

func usageErrorf(format string, a ...any) error { return usageError(fmt.Errorf(format, a...)) }

// runOutcome is the error of a run that did not succeed; the view has
// already said why.
func runOutcome(code int) error {
	return &codedError{code: code, err: fmt.Errorf("exit %d", code), silent: true}
}

// exitCode is the code an error exits with: its own, else 1. Usage errors
// carry exitUsage from where they are found, cobra's included (see
// usageArgs and the root's flag error function); an error nobody coded is a
// failure, not bad usage.
func exitCode(err error) int {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitFailed
}

// usageArgs makes the argument check of cmd and of each of its
// subcommands (cobra's Args validators: a wrong argument count) return a
// usage error.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageError(err)
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
// flag errors are coded already (SetFlagErrorFunc).
func unknownCommand(root, ran *cobra.Command, err error) error {
	var ce *codedError
	if ran == root && !errors.As(err, &ce) {
		return usageError(err)
	}
	return err
}

func isSilent(err error) bool {
	var ce *codedError
	return errors.As(err, &ce) && ce.silent
}
