package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResumeAfterSIGKILLKillsASetsidGrandchild: acpflow dies without a
// teardown; the agent dies with it (Pdeathsig) but its setsid grandchild
// does not. The run store recorded the grandchild when the watcher saw it,
// so resume kills it.
func TestResumeAfterSIGKILLKillsASetsidGrandchild(t *testing.T) {
	dir := t.TempDir()
	cmd, record := startHanging(t, dir, []string{"-prompt-hang"})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPrompted(t, cmd, record)
	time.Sleep(300 * time.Millisecond) // several looks of the watcher
	cmd.Process.Kill()
	cmd.Wait()
	var gc int
	for _, r := range readRecords(t, record) {
		if r["event"] == "grandchild" {
			gc = int(r["pid"].(float64))
		}
	}
	if gc == 0 || syscall.Kill(gc, 0) != nil {
		t.Fatalf("no live setsid grandchild after the SIGKILL (%d)", gc)
	}
	t.Cleanup(func() { syscall.Kill(gc, syscall.SIGKILL) }) // if the test fails
	r := acpflow(t, dir, "runs", "--json", "--state", filepath.Join(dir, "state.db"))
	var run struct {
		ID string `json:"run_id"`
	}
	json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &run)
	res := acpflow(t, dir, "resume", run.ID, "--timeout", "1s", "--state", filepath.Join(dir, "state.db"))
	if !strings.Contains(res.stderr, fmt.Sprintf("killed agent process %d ", gc)) {
		t.Errorf("resume did not say it killed %d:\n%s", gc, res.stderr)
	}
	assertAgentsGone(t, record)
}
