package main

// End to end: a step settles when its turn ends (issue 10), through the
// real binary on a workflow file.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// jsonEvents decodes acpflow's --json output.
func jsonEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, e)
	}
	return out
}

func TestADependantStartsWhenItsNeedsTurnEndsNotWhenItsAgentIsGone(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: settle
agents:
  slow-to-go:
    command: %s
    args: %s
    dispose: {eof-grace: 1s, term-grace: 1s}
  quick:
    command: %s
    args: %s
steps:
  - id: first
    uses: acp-subagent
    with: {agent: slow-to-go, prompt: one}
  - id: second
    needs: [first]
    uses: acp-subagent
    with: {agent: quick, prompt: "after ${{ steps.first.final }}"}
`, testAgent, agentArgs("-record", rec, "-noise", "-chunks", "thinking,DONE", "-ignore-eof", "-trap-term"), testAgent, agentArgs("-record", rec)))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertAgentsGone(t, rec)
	at := map[string]int{}
	for i, e := range jsonEvents(t, r.stdout) {
		key := fmt.Sprint(e["type"], ":", e["step"])
		if e["type"] == "step_update" {
			key = fmt.Sprint(e["kind"], ":", e["step"])
		}
		if _, seen := at[key]; !seen {
			at[key] = i
		}
	}
	order := []string{"turn_end:first", "step_end:first", "step_start:second", "teardown:first", "run_end:"}
	for i := 1; i < len(order); i++ {
		a, okA := at[order[i-1]]
		b, okB := at[order[i]]
		if !okA || !okB || a > b {
			t.Errorf("want %s before %s (positions %v)", order[i-1], order[i], at)
		}
	}
	var res struct {
		Steps map[string]struct {
			Output, Final string
		}
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if first := res.Steps["first"]; first.Output != "thinking\n\nDONE" || first.Final != "DONE" {
		t.Errorf("first: output %q final %q", first.Output, first.Final)
	}
	prompts := ""
	for _, r := range readRecords(t, rec) {
		if r["event"] == "prompt" {
			prompts += fmt.Sprint(r["params"])
		}
	}
	if !strings.Contains(prompts, "after DONE") {
		t.Errorf("the second step's prompt did not get the first's final message: %s", prompts)
	}
}

func TestA100MiBAnswerFailsTheStepAtMaxOutputWithBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: flood
agents:
  flood:
    command: %s
    args: %s
    # The agent is acpflow's child, so its peak counts in acpflow's rusage:
    # keep the flooding Go agent's own garbage from being what is measured.
    env: {GOMEMLIMIT: 32MiB}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: flood, prompt: talk}
`, testAgent, agentArgs("-record", rec, "-no-chunks", "-flood", "102400", "-flood-size", "1024")))
	out := filepath.Join(dir, "out.jsonl")
	// A soft limit makes the collector keep up on a loaded machine, so the
	// peak says what acpflow retains, not how far its garbage got ahead of
	// a starved collector; retention past it would still show.
	r, rss := runMeasured(t, dir, []string{"GOMEMLIMIT=96MiB"}, "run", wf, "--output", out, "--workspace", dir)
	assertAgentsGone(t, rec)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("peak RSS %d MiB", rss>>20)
	// The default max-output is 8 MiB; the store, the result and the
	// events each hold a copy at most. Before the limit: 0.94 GB.
	if rss > 256<<20 {
		t.Errorf("peak RSS %d MiB for a 100 MiB answer: memory is not bounded by max-output", rss>>20)
	}
	var res struct {
		Status string
		Steps  map[string]struct {
			Status, Output, Error string
		}
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	// The output is in the line once (final is empty: the last message
	// was cut), so the line is the cap and a little more.
	if len(b) > 8<<20+16<<10 {
		t.Errorf("the result line is %d bytes for an 8 MiB max-output", len(b))
	}
	s := res.Steps["s"]
	if res.Status != "failed" || s.Status != "failed" || len(s.Output) != 8<<20 || !strings.Contains(s.Error, "max-output (8 MiB)") {
		t.Errorf("run %s, step %s with %d bytes: %s", res.Status, s.Status, len(s.Output), s.Error)
	}
}

// launchReportVar makes the test binary a launcher (see TestMain): it runs
// its arguments and writes the child's peak RSS in bytes to the file named.
const launchReportVar = "ACPFLOW_E2E_LAUNCH_REPORT"

// launchAndReport runs argv and reports its peak RSS, then exits with its
// code.
//
// # Notes
//
// A child's ru_maxrss starts at its parent's RSS when it was forked (Go
// forks with CLONE_VM, and exec keeps the peak of the address space it
// leaves). Started straight from a test binary that has run other tests
// (486 MiB under -race), acpflow would report that; started from a
// launcher that has done nothing else, it reports its own.
func launchAndReport(report string, argv []string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, launchReportVar+"=") {
			cmd.Env = append(cmd.Env[:i:i], cmd.Env[i+1:]...)
			break
		}
	}
	cmd.Run()
	if cmd.ProcessState == nil {
		os.Exit(127)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	os.WriteFile(report, []byte(fmt.Sprint(rss)), 0o644)
	os.Exit(cmd.ProcessState.ExitCode())
}

// runMeasured runs acpflow as acpflow() does, with env added, and returns
// its peak resident set in bytes. It starts acpflow through this test
// binary as a launcher (launchAndReport), so that the peak is acpflow's
// own, not the test's (a file it wrote, the tests run before).
func runMeasured(t *testing.T, dir string, env []string, args ...string) (result, int64) {
	t.Helper()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	report := filepath.Join(t.TempDir(), "rusage")
	cmd := exec.Command(os.Args[0], append([]string{acpflowBin}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1", launchReportVar+"="+report), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the launcher wrote no report: %v\n%s", err, errb.String())
	}
	var rss int64
	fmt.Sscan(string(b), &rss)
	return result{code, out.String(), errb.String()}, rss
}
