//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package worktree

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on path, polling so that ctx can end
// the wait. The kernel drops the lock when the holder dies, so a killed
// acpflow never leaves this lock behind (unlike git's *.lock files).
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// stopGently makes ctx's end send SIGTERM to git and the git processes it
// started (a `git worktree add` checks out in a child `git reset`), so they
// remove their own junk and locks rather than leave a half-added worktree.
func stopGently(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}
