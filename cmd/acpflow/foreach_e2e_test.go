package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// forEachWorkflow is a for-each of three elements, all at once, each
// asking one permission: every kind of event an element has.
const forEachWorkflow = `name: each
agents:
  demo: {builtin: demo}
policies:
  permission: allow
steps:
  - id: review_each
    for-each: '["apple", "banana", "cherry"]'
    uses: acp-subagent
    with:
      agent: demo
      prompt: |
        review ${{ item }}
        tool: execute echo ${{ item }}
outputs:
  zeta: ${{ steps.review_each.output[0] }}
  alpha: ${{ steps.review_each.final }}
  mid: ${{ len(steps.review_each.output) }}
`

// Every event of a for-each element carries the element's index, whatever
// part of acpflow emits it (the engine's step_start and element_end, the
// agent's chunks, the permission, turn_end, the teardown after the step
// settled), and the index is the right one: each element's text is about
// its own item. The step's own step_end has none.
func TestEveryEventOfAForEachElementCarriesItsIndex(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, forEachWorkflow)
	r := acpflow(t, dir, "run", wf, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	items := []string{"apple", "banana", "cherry"}
	seen := map[int]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Type, Step, Kind, Text, Title string
			Index                         *int
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if e.Step != "review_each" {
			continue
		}
		if e.Type == "step_end" {
			if e.Index != nil {
				t.Errorf("the step's step_end has an index: %s", line)
			}
			continue
		}
		if e.Index == nil || *e.Index < 0 || *e.Index > 2 {
			t.Errorf("an element's event without its index: %s", line)
			continue
		}
		what := e.Type
		if e.Type == "step_update" {
			what = e.Kind
		}
		if seen[*e.Index] == nil {
			seen[*e.Index] = map[string]bool{}
		}
		seen[*e.Index][what] = true
		// The demo agent says what it was asked: an element's text, and
		// its permission's title, name its own item and no other.
		for i, item := range items {
			if text := e.Text + e.Title; strings.Contains(text, item) && i != *e.Index {
				t.Errorf("an event of element %d is about %s (element %d): %s", *e.Index, item, i, line)
			}
		}
	}
	for i := range items {
		for _, what := range []string{"step_start", "spawned", "session", "agent_message_chunk", "permission", "turn_end", "element_end", "teardown"} {
			if !seen[i][what] {
				t.Errorf("element %d: no %s with its index (saw %v)", i, what, seen[i])
			}
		}
	}
}

// The plain view says which element each line is of, and counts them, as
// the run goes and in its summary; the summary prints the outputs in the
// order the file writes them (zeta, alpha, mid: not name order). show
// gives each element a row and the outputs in the same order, a list
// output indented over several lines.
func TestThePlainViewAndShowFollowAForEachElementByElement(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, forEachWorkflow)
	r := acpflow(t, dir, "run", wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"[review_each #0] started", "[review_each #1] started", "[review_each #2] started"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("no line %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "[review_each] started"); n != 0 {
		t.Errorf("%d start lines that do not say which element:\n%s", n, r.stdout)
	}
	for i := range 3 {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\[review_each #%d\] succeeded in .*, [123]/3 done$`, i)).MatchString(r.stdout) {
			t.Errorf("no end line of element %d with the count:\n%s", i, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^\[review_each\] succeeded in .*, 3/3 done$`).MatchString(r.stdout) {
		t.Errorf("the step's end line has no count:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "\n  review_each: 3/3 done\n") {
		t.Errorf("the summary does not count the elements:\n%s", r.stdout)
	}
	assertInOrder(t, r.stdout, "\noutputs:\n", "  zeta: ", "\n  alpha: ", "\n  mid: 3\n")
	if strings.Contains(r.stdout, "resume with:") {
		t.Errorf("a run that succeeded is given a resume hint:\n%s", r.stdout)
	}

	id := runIDOf(t, r.stdout)
	show := acpflow(t, dir, "show", id)
	if show.code != 0 {
		t.Fatalf("show: exit %d\n%s", show.code, show.stderr)
	}
	assertInOrder(t, show.stdout, "  outputs:\n", "    zeta: demo agent received: review apple", "    alpha: [\n", "    mid: 3\n")
	if !strings.Contains(show.stdout, "  elements: 3/3 done\n") {
		t.Errorf("show does not count the elements:\n%s", show.stdout)
	}
	for i, item := range []string{"apple", "banana", "cherry"} {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^    #%d +succeeded +1 attempt\(s\) +\S+ +demo agent received: review %s$`, i, item))
		if !row.MatchString(show.stdout) {
			t.Errorf("no row of element %d (%s):\n%s", i, item, show.stdout)
		}
	}
}

// failingWorkflow has a for-each whose middle element fails (its cwd does
// not exist), then a step whose agent crashes with several lines of
// stderr: the run fails, with a multi-line error.
func failingWorkflow(dir string) string {
	return fmt.Sprintf(`name: failing
agents:
  demo: {builtin: demo}
  bad: {command: %s, args: %s}
steps:
  - id: each
    for-each: '["ok", "missing", "ok"]'
    max-parallel: 1
    continue-on-error: true
    uses: acp-subagent
    with: {agent: demo, prompt: "look at ${{ item }}", cwd: "${{ item }}"}
  - id: crash
    needs: [each]
    uses: acp-subagent
    with: {agent: bad, prompt: hi}
`, testAgent, agentArgs("-record", filepath.Join(dir, "record.jsonl"), "-crash-on", "session/prompt", "-stderr-lines", "3"))
}

// A failed run's plain output says which elements failed and how many
// succeeded, prints the failed step's whole error (every stderr line), and
// ends with how to resume the run; show lists the failed element's error
// in its row.
func TestAFailedRunsPlainOutputEndsWithTheResumeHint(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ok"), 0o755)
	wf := writeWorkflow(t, dir, failingWorkflow(dir))
	r := acpflow(t, dir, "run", wf)
	assertAgentsGone(t, filepath.Join(dir, "record.jsonl"))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^\[each #1\] failed in .*, 1/3 done, 1 failed: cwd .*missing does not exist$`).MatchString(r.stdout) {
		t.Errorf("no line of the failed element:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`(?m)^\[each\] failed in .*, 2/3 done, 1 failed: item 1: `).MatchString(r.stdout) {
		t.Errorf("the step's line does not count its elements:\n%s", r.stdout)
	}
	assertInOrder(t, r.stdout, "[crash] failed", "stderr line 1", "stderr line 3", "testagent: crash detail 3",
		"\n  each: 2/3 done, 1 failed\n")
	id := runIDOf(t, r.stdout)
	if want := "resume with: acpflow resume " + id + "\n"; !strings.HasSuffix(r.stdout, want) {
		t.Errorf("the output does not end with %q:\n%s", want, r.stdout)
	}

	show := acpflow(t, dir, "show", id)
	if !strings.Contains(show.stdout, "  elements: 2/3 done, 1 failed\n") ||
		!regexp.MustCompile(`(?m)^    #1 +failed +1 attempt\(s\) +\S+ +error: cwd .*missing does not exist$`).MatchString(show.stdout) {
		t.Errorf("show has no row of the failed element:\n%s", show.stdout)
	}
	// show --json has the same rows, by index.
	js := acpflow(t, dir, "show", id, "--json")
	var detail struct {
		Steps map[string]struct {
			Elements []struct {
				Index    int    `json:"index"`
				Status   string `json:"status"`
				Attempts int    `json:"attempts"`
				Error    string `json:"error"`
			} `json:"elements"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &detail); err != nil {
		t.Fatalf("show --json: %v\n%s", err, js.stdout)
	}
	els := detail.Steps["each"].Elements
	if len(els) != 3 || els[0].Index != 0 || els[0].Status != "succeeded" || els[1].Status != "failed" ||
		!strings.Contains(els[1].Error, "missing does not exist") || els[2].Index != 2 || els[2].Attempts != 1 {
		t.Errorf("show --json elements of each: %+v", els)
	}
	if e := detail.Steps["crash"].Elements; e != nil {
		t.Errorf("a step without for-each has elements: %+v", e)
	}
}

// An interrupted run (exit 130) ends with the resume hint too.
func TestAnInterruptedRunEndsWithTheResumeHint(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: hang
agents:
  slow: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: slow, prompt: hi}}
`, testAgent, agentArgs("-record", record, "-prompt-hang")))
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	cmd := exec.Command(acpflowBin, "run", wf)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the agent has the prompt (its record says so).
	deadline := time.Now().Add(30 * time.Second)
	for !hasEvent(t, record, "prompt") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the agent never got the prompt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	out, _ := io.ReadAll(bufio.NewReader(stdout))
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130\n%s", err, out)
	}
	assertAgentsGone(t, record)
	id := runIDOf(t, string(out))
	if want := "resume with: acpflow resume " + id + "\n"; !strings.HasSuffix(string(out), want) {
		t.Errorf("the output does not end with %q:\n%s", want, out)
	}
}

// runIDOf is the run id of the view's first line ("run ID: WORKFLOW").
func runIDOf(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^run (\d{8}T\d{6}-[0-9a-f]+): `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	return m[1]
}

// assertInOrder fails unless out holds each of parts, in that order.
func assertInOrder(t *testing.T, out string, parts ...string) {
	t.Helper()
	rest := out
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Errorf("no %q after the parts before it in:\n%s", p, out)
			return
		}
		rest = rest[i+len(p):]
	}
}

// A batch with a failed run ends its summary with how to resume the
// batch.
func TestABatchWithAFailedRunEndsWithTheResumeHint(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ok"), 0o755)
	wf := writeWorkflow(t, dir, `name: batch
inputs:
  dir: {type: string}
agents:
  demo: {builtin: demo}
steps:
  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi, cwd: "${{ inputs.dir }}"}}
`)
	lines := filepath.Join(dir, "in.jsonl")
	os.WriteFile(lines, []byte("{\"dir\":\"ok\"}\n{\"dir\":\"missing\"}\n"), 0o644)
	r := acpflow(t, dir, "run", wf, "--inputs", lines)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`batch (b\d{8}T\d{6}-[0-9a-f]+): 2 runs`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no batch id in:\n%s", r.stderr)
	}
	if want := "resume with: acpflow resume " + m[1] + "\n"; !strings.HasSuffix(r.stdout, want) {
		t.Errorf("the output does not end with %q:\n%s", want, r.stdout)
	}
}
