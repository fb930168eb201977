//go:build linux

package procgroup

import (
	"os/exec"
	"testing"
	"time"
)

// TestAHelperOfAcpflowsOwnOutlivesAnAgentsTeardown: with the subreaper
// on and one agent left, its teardown sweeps every other child of
// acpflow as that agent's orphan; a helper run with RunOwn (git, for
// worktrees) is neither killed nor reaped, and its exit status stays its
// own.
func TestAHelperOfAcpflowsOwnOutlivesAnAgentsTeardown(t *testing.T) {
	c := startShell(t, t.TempDir(), `cat >/dev/null`)
	helper := exec.Command("/bin/sh", "-c", "read line; exit 7")
	in, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- RunOwn(helper) }()
	// Once the helper runs (registered), the agent is torn down.
	for !func() bool { own.mu.Lock(); defer own.mu.Unlock(); return len(own.pids) == 1 }() {
		time.Sleep(time.Millisecond)
	}
	c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	select {
	case err := <-done:
		t.Fatalf("the helper ended during the teardown: %v", err)
	default:
	}
	in.Write([]byte("go\n"))
	err = <-done
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("the helper's exit: %v, want its own status 7", err)
	}
	if isOwn(helper.Process.Pid) {
		t.Error("the helper is still registered after it ended")
	}
}
