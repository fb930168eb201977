package main

import (
	"errors"
	"fmt"
)

// Exit codes are API (SPEC §1): one place defines them, typed errors carry
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

func exitCode(err error) int {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	// cobra's own errors (unknown command, wrong arg count) are usage errors.
	return exitUsage
}

func isSilent(err error) bool {
	var ce *codedError
	return errors.As(err, &ce) && ce.silent
}
