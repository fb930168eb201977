//go:build !linux

package procgroup

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrGone is returned (wrapped) by SignalOwner when the process is not
// the one that started at the given time (any more).
var ErrGone = errors.New("process gone")

// SignalOwner sends SIGINT to process pid, provided it is still the
// process that started at ticks. Without pidfds the check and the signal
// are two steps; the start time makes a reuse in between unlikely.
func SignalOwner(pid int, ticks uint64) error {
	if !Alive(pid, ticks) {
		return fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("process %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}
