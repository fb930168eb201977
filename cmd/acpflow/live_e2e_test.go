package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheLiveViewDrawsWhileStepsRun runs acpflow on a terminal (a pty from
// util-linux's script) and checks that the live view showed a step while it
// was prompting, not only the final frame.
func TestTheLiveViewDrawsWhileStepsRun(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed: no pty to run the live view on")
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: live
agents:
  slow:
    command: %s
    args: %s
steps:
  - {id: first, uses: acp-subagent, with: {agent: slow, prompt: one}}
`, testAgent, agentArgs("-record", rec, "-prompt-delay", "1s")))
	// script's pty has no size unless one is set; without one acpflow
	// prints plain lines (see the test below).
	cmd := exec.Command(scriptBin, "-qfec", "stty cols 100 rows 20; "+acpflowBin+" run "+wf+" --workspace "+dir, "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm", "COLUMNS=100", "LINES=20")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	assertAgentsGone(t, rec)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "prompting") {
		t.Errorf("the live view never showed the step prompting; it printed:\n%q", out)
	}
	if !strings.Contains(string(out), "succeeded") {
		t.Errorf("no final frame:\n%q", out)
	}
}

// TestATerminalWithoutASizeGetsPlainLines: a pty that reports no width (a
// fresh `docker run -t`) gets the plain view, which shows every step, since
// the live view could draw nothing there.
func TestATerminalWithoutASizeGetsPlainLines(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed: no pty to run on")
	}
	root := repoRoot(t)
	cmd := exec.Command(scriptBin, "-qfec", "stty cols 0 rows 0; "+acpflowBin+" run workflows/examples/hello.yaml", "/dev/null")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "[greet] started") {
		t.Errorf("want the plain view's lines on a terminal without a size; it printed:\n%q", out)
	}
}
