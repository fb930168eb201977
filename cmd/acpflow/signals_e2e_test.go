package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startHanging starts `acpflow run` (a helper process: the test signals it,
// never itself) on an agent that hangs in its turn after starting a setsid
// grandchild, and waits until the agent has the prompt.
func startHanging(t *testing.T, dir string, agentFlags []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: hang
agents:
  slow: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: slow, prompt: hi}}
`, testAgent, agentArgs(append([]string{"-record", record, "-setsid-grandchild"}, agentFlags...)...)))
	cmd := exec.Command(acpflowBin, append([]string{"run", wf, "--state", filepath.Join(dir, "state.db")}, args...)...)
	cmd.Dir = dir
	return cmd, record
}

func waitPrompted(t *testing.T, cmd *exec.Cmd, record string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang guard: seconds at most on a loaded machine
	for !hasEvent(t, record, "prompt") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the agent never got the prompt")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runStatus is the recorded status of the only run in dir's store.
func runStatus(t *testing.T, dir string) string {
	t.Helper()
	r := acpflow(t, dir, "runs", "--json", "--state", filepath.Join(dir, "state.db"))
	var run struct {
		Status string `json:"status"`
	}
	json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &run)
	return run.Status
}

func TestSIGHUPTearsDownRecordsTheRunAndExits130(t *testing.T) {
	dir := t.TempDir()
	cmd, record := startHanging(t, dir, []string{"-prompt-hang"})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPrompted(t, cmd, record)
	cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit = %v, want 130\n%s", err, stderr.String())
	}
	if got := runStatus(t, dir); got != "cancelled" {
		t.Errorf("run status = %q, want cancelled", got)
	}
	assertAgentsGone(t, record)
}

// TestAClosedStdoutTearsDownRecordsTheRunAndExitsOne is `acpflow run --json
// | head -2`: the reader goes away mid-run. acpflow must not die of SIGPIPE
// with the agent's setsid grandchild left and the run `running`.
func TestAClosedStdoutTearsDownRecordsTheRunAndExitsOne(t *testing.T) {
	dir := t.TempDir()
	// The agent keeps streaming, so acpflow has events to write.
	cmd, record := startHanging(t, dir, []string{"-prompt-delay", "500ms", "-chunks", "a,b,c"}, "--json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.Contains(lines.Text(), `"spawned"`) {
	}
	waitPrompted(t, cmd, record)
	stdout.Close() // as head does once it has its lines
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit = %v (%v), want exit status 1\n%s", err, cmd.ProcessState, stderr.String())
	}
	if got := runStatus(t, dir); got != "failed" {
		t.Errorf("run status = %q, want failed", got)
	}
	assertAgentsGone(t, record)
}
