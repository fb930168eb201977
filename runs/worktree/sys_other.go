//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package worktree

import (
	"context"
	"os/exec"
)

// lockFile is a no-op where flock is missing: acpflow processes then rely
// on retrying git's own lock alone.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}

// stopGently keeps exec's default (kill) where process groups are missing.
func stopGently(cmd *exec.Cmd) {}
