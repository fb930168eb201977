package procgroup

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrGone is returned (wrapped) by SignalOwner when the process is not
// the one that started at the given time (any more).
var ErrGone = errors.New("process gone")

// SignalOwner sends SIGINT to process pid, provided it is still the
// process that started at ticks (an acpflow process that owns a run). The
// check and the signal go through a pidfd, so a pid reused between them
// is never signalled: the pidfd names the process that was checked.
func SignalOwner(pid int, ticks uint64) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("process %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if !Alive(pid, ticks) {
		return fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGINT, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}
