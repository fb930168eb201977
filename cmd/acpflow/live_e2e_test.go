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
`, testAgent, agentArgs("-record", rec, "-prompt-delay", "3s")))
	// The turn lasts 3 s, 25 of the live view's 120 ms redraws: enough for
	// a loaded machine to draw the step prompting at least once.
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

// TestTheLiveViewFollowsAForEachAndPrintsTheWholeError: on a terminal the
// live view prints the run's id above its lines, counts a for-each's
// elements as they end (`1/3 done`), and once the run failed prints the
// failed step's whole error below the block (its line is cut at the
// terminal's width), then the resume hint.
func TestTheLiveViewFollowsAForEachAndPrintsTheWholeError(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed: no pty to run the live view on")
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: live-each
agents:
  slow:
    command: %s
    args: %s
  bad:
    command: %s
    args: %s
steps:
  - id: each
    for-each: '["a", "b", "c"]'
    max-parallel: 1
    uses: acp-subagent
    with: {agent: slow, prompt: "look at ${{ item }}"}
  - id: crash
    needs: [each]
    uses: acp-subagent
    with: {agent: bad, prompt: hi}
`, testAgent, agentArgs("-record", rec, "-prompt-delay", "2s"),
		testAgent, agentArgs("-record", rec, "-crash-on", "session/prompt", "-stderr-lines", "3")))
	cmd := exec.Command(scriptBin, "-qfec", "stty cols 80 rows 20; "+acpflowBin+" run "+wf+" --workspace "+dir, "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm", "COLUMNS=80", "LINES=20")
	b, err := cmd.CombinedOutput()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	assertAgentsGone(t, rec)
	out := strings.ReplaceAll(string(b), "\r", "")
	if err == nil {
		t.Fatalf("the run succeeded; want it failed:\n%q", out)
	}
	first := strings.TrimLeft(out, "\n")
	id := runIDOf(t, first)
	if !strings.HasPrefix(first, "run "+id+": live-each\n") {
		t.Errorf("the run's id is not on the first line:\n%q", out)
	}
	// Element by element: a count while the step runs (two seconds between
	// two elements' ends), and the last frame's.
	for _, want := range []string{"1/3 done, 1 running", "3/3 done"} {
		if !strings.Contains(out, want) {
			t.Errorf("the live view never showed %q:\n%q", want, out)
		}
	}
	// After the block: the whole error, every line of the agent's stderr,
	// then the summary and the hint.
	after := out[strings.LastIndex(out, "step crash failed: "):]
	assertInOrder(t, after, "agent bad exited (exit status 3) during session/prompt", "stderr line 1", "stderr line 3",
		"testagent: crash detail 3", "\nrun "+id+" failed in ", "  each: 3/3 done\n")
	if want := "resume with: acpflow resume " + id + "\n"; !strings.HasSuffix(out, want) {
		t.Errorf("the output does not end with %q:\n%q", want, out)
	}
}
