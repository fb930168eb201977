package cli

import "fmt"

// Exit codes are API (docs/results.md#exit-codes), the same for every
// backend: one place defines them, and *ExitError carries them to main.
const (
	ExitOK          = 0
	ExitFailed      = 1   // at least one run failed
	ExitUsage       = 2   // bad usage, invalid workflow, policy or input: nothing started
	ExitInterrupted = 130 // SIGINT/SIGTERM, after every child was torn down
)

// ExitError is an error with the exit code it ends the command with.
type ExitError struct {
	Code   int
	Err    error
	Silent bool // already reported (e.g. by the run view)
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is bad usage: exit 2, nothing started.
func UsageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// UsageErrorf is UsageError of a formatted message.
func UsageErrorf(format string, a ...any) error { return UsageError(fmt.Errorf(format, a...)) }

// Outcome is the error of runs that did not all succeed; the view has
// already said why.
func Outcome(code int) error {
	return &ExitError{Code: code, Err: fmt.Errorf("exit %d", code), Silent: true}
}
