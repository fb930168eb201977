package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/runs/store"
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
	var gc int
	for _, r := range readRecords(t, record) {
		if r["event"] == "grandchild" {
			gc = int(r["pid"].(float64))
		}
	}
	if gc == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the agent recorded no grandchild")
	}
	// The kill comes once the store holds the grandchild (an event), not
	// after a sleep the watcher and the store's writer could outlast on a
	// loaded machine; the minute is a hang guard.
	if !storeHolds(t, filepath.Join(dir, "state.db"), gc, time.Minute) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the store never recorded the grandchild %d", gc)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if syscall.Kill(gc, 0) != nil {
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

// storeHolds waits up to limit for the store at path to list pid among
// the live processes of its runs, as acpflow records them while it runs.
func storeHolds(t *testing.T, path string, pid int, limit time.Duration) bool {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		children, err := s.LiveChildren(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range children {
			if c.PID == pid {
				return true
			}
		}
	}
	return false
}
