package procgroup

import (
	"os/exec"
	"sync"
)

// own are the pids of the helpers acpflow runs for itself (git, for
// isolation: worktree) while they run: direct children of acpflow that are
// no agent's, which a teardown's sweep of strays must neither kill nor
// reap (their exit status is their exec.Cmd's).
var own = struct {
	mu   sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// RunOwn runs cmd, a helper of acpflow's own, to its end (cmd.Run), so
// that no agent's teardown takes it for an orphan of that agent: with the
// subreaper on and one agent left, any other child of acpflow would be
// swept with it.
func RunOwn(cmd *exec.Cmd) error {
	spawned := registry.begin()
	err := cmd.Start()
	if err == nil {
		own.mu.Lock()
		own.pids[cmd.Process.Pid] = true
		own.mu.Unlock()
	}
	spawned()
	if err != nil {
		return err
	}
	defer func() {
		own.mu.Lock()
		delete(own.pids, cmd.Process.Pid)
		own.mu.Unlock()
	}()
	return cmd.Wait()
}

// isOwn reports whether pid is a helper RunOwn runs.
func isOwn(pid int) bool {
	own.mu.Lock()
	defer own.mu.Unlock()
	return own.pids[pid]
}
