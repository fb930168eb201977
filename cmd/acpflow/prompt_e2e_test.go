package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// promptRuns lists the runs of a store as `acpflow runs --json` prints
// them, newest first.
func promptRuns(t *testing.T, dir, state string) []map[string]any {
	t.Helper()
	r := acpflow(t, dir, "runs", "--json", "--state", state)
	if r.code != 0 {
		t.Fatalf("runs: exit %d\n%s", r.code, r.stderr)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("runs --json: %v: %q", err, line)
		}
		out = append(out, m)
	}
	return out
}

func TestPromptPrintsTheDemoAgentsAnswerAndRecordsTheRun(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	r := acpflow(t, dir, "prompt", "demo", "Say hello", "--state", state)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// stdout is the answer alone, as a script would read it; the progress
	// is on stderr.
	want := "demo agent received: Say hello\ndemo agent: end of turn (0 tool requests).\n"
	if r.stdout != want {
		t.Errorf("stdout = %q, want the answer alone %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "succeeded") {
		t.Errorf("stderr does not show the run's progress:\n%s", r.stderr)
	}
	runs := promptRuns(t, dir, state)
	if len(runs) != 1 || runs[0]["workflow"] != "prompt-demo" || runs[0]["status"] != "succeeded" {
		t.Fatalf("runs = %v, want one succeeded run of prompt-demo", runs)
	}
	if in, _ := runs[0]["inputs"].(map[string]any); in["prompt"] != "Say hello" {
		t.Errorf("the run's recorded inputs = %v, want the prompt", runs[0]["inputs"])
	}
	id := runs[0]["run_id"].(string)
	if s := acpflow(t, dir, "show", id, "--state", state); s.code != 0 || !strings.Contains(s.stdout, "demo agent received: Say hello") {
		t.Errorf("show %s: exit %d\n%s\n%s", id, s.code, s.stdout, s.stderr)
	}
	// The same prompt again reuses the workflow file written the first
	// time (named by its content), so a recorded run's file never changes.
	acpflow(t, dir, "prompt", "demo", "Again", "--state", state)
	files, _ := filepath.Glob(filepath.Join(dir, "prompts", "*.yaml"))
	if len(files) != 1 {
		t.Errorf("prompt files = %v, want one for the same agent and flags", files)
	}
}

func TestPromptUnderPermissionRejectRejectsAndRecordsTheToolCall(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "results.jsonl")
	r := acpflow(t, dir, "prompt", "demo", "Clean up\ntool: execute rm -rf x", "--permission", "reject", "--state", state, "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "permission execute rm -rf x: reject-once") {
		t.Errorf("the answer does not say the call was rejected:\n%s", r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Steps map[string]struct {
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("--output: %v\n%s", err, b)
	}
	perms := res.Steps["prompt"].Permissions
	if len(perms) != 1 || perms[0]["decision"] != "reject" || perms[0]["kind"] != "execute" || perms[0]["rule"] != "shorthand" {
		t.Errorf("recorded permissions = %v, want the execute call rejected by the shorthand", perms)
	}
	// With no terminal to ask at, the default (ask) waits for a person
	// (up to its ask-timeout, 10 minutes): acpflow approve answers it.
	bg := startAcpflow(t, dir, "prompt", "demo", "tool: execute rm -rf x", "--state", state)
	id := pendingApprovals(t, dir, state, 1)[0]["approval_id"].(string)
	if a := acpflow(t, dir, "approve", id, "reject", "--state", state); a.code != 0 {
		t.Fatalf("approve %s reject: exit %d\n%s", id, a.code, a.stderr)
	}
	if r := bg.wait(t); r.code != 0 || !strings.Contains(r.stdout, "permission execute rm -rf x: reject-once") {
		t.Errorf("default permission without a terminal, answered reject: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = acpflow(t, dir, "prompt", "demo", "tool: execute touch y", "--permission", "allow", "--state", state)
	if r.code != 0 || !strings.Contains(r.stdout, "permission execute touch y: allow-once") {
		t.Errorf("--permission allow: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestPromptJSONPrintsTheEventStreamAndNoAnswerApart(t *testing.T) {
	dir := t.TempDir()
	r := acpflow(t, dir, "prompt", "demo", "-", "--json", "--state", filepath.Join(dir, "state.db"))
	// No stdin given: "-" reads an empty prompt, which is refused.
	if r.code != 2 || !strings.Contains(r.stderr, "the prompt is empty") {
		t.Errorf("an empty prompt from stdin: exit %d, want 2\n%s", r.code, r.stderr)
	}
	cmd := exec.Command(acpflowBin, "prompt", "demo", "-", "--json", "--state", filepath.Join(dir, "state.db"))
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("from stdin\n")
	b, err := cmd.Output()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	if err != nil {
		t.Fatalf("prompt --json: %v", err)
	}
	types := map[string]bool{}
	var answer strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stdout is not only JSON lines: %q", line)
		}
		types[e["type"].(string)] = true
		if e["kind"] == "agent_message_chunk" {
			answer.WriteString(e["text"].(string))
		}
	}
	if !types["run_start"] || !types["run_end"] {
		t.Errorf("--json event types = %v", types)
	}
	if !strings.HasPrefix(answer.String(), "demo agent received: from stdin\n") {
		t.Errorf("the prompt from stdin did not reach the agent: its answer is %q", answer.String())
	}
}

func TestPromptRefusesWhatItCannotRun(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	r := acpflow(t, dir, "prompt", "nosuchagent", "hi", "--state", state)
	if r.code != 2 || !strings.Contains(r.stderr, `unknown agent "nosuchagent"`) {
		t.Errorf("unknown preset: exit %d, want 2\n%s", r.code, r.stderr)
	}
	for _, p := range append([]acpagent.Preset{{Name: "demo"}}, acpagent.Presets()...) {
		if !strings.Contains(r.stderr, p.Name) {
			t.Errorf("the error does not list the preset %s:\n%s", p.Name, r.stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo"}, "missing TEXT"},
		{[]string{"demo", "a", "b"}, `unexpected argument "b"`},
		{[]string{"--", "agent"}, "missing COMMAND or TEXT after --"},
		{[]string{"hi", "--"}, "missing COMMAND after --"},
		{[]string{"demo", "hi", "--permission", "maybe"}, `decision "maybe"`},
		{[]string{"demo", "hi", "--env", "A=b"}, "want the NAME of a variable"},
		{[]string{"demo", "  "}, "the prompt is empty"},
	} {
		r := acpflow(t, dir, append([]string{"prompt", "--state", state}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("prompt %q: exit %d, want 2 and %q\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
	if runs := promptRuns(t, dir, state); len(runs) != 0 {
		t.Errorf("a refused prompt recorded runs: %v", runs)
	}
}

func TestPromptRunsAnyACPCommandAndResumes(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	rec := filepath.Join(dir, "agent.jsonl")
	r := acpflow(t, dir, "prompt", "hi", "--state", state, "--", testAgent, "-chunks", "an,swer", "-record", rec)
	if r.code != 0 || r.stdout != "answer\n" {
		t.Fatalf("prompt -- testagent: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	// The spec's form, AGENT TEXT with AGENT "-- COMMAND ARGS": the text last.
	r = acpflow(t, dir, "prompt", "--state", state, "--", testAgent, "-chunks", "last,form", "-record", rec, "hi")
	if r.code != 0 || r.stdout != "lastform\n" {
		t.Fatalf("prompt -- testagent ... TEXT: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, rec)
	if runs := promptRuns(t, dir, state); len(runs) != 2 || runs[0]["workflow"] != "prompt-testagent" {
		t.Errorf("runs = %v", runs)
	}

	// An agent that cannot start fails the run (exit 1), prints no answer,
	// and the run resumes once the cause is gone: the demo agent behind a
	// gate file in the workspace.
	gate := `test -e ready || { echo "not ready" >&2; exit 3; }; exec "$0" agent demo`
	r = acpflow(t, dir, "prompt", "after the gate", "--state", state, "--", "sh", "-c", gate, acpflowBin)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("the gated agent: exit %d, want 1 and no answer; stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	runs := promptRuns(t, dir, state)
	if runs[0]["status"] != "failed" {
		t.Fatalf("the failed prompt's run = %v", runs[0])
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	id := runs[0]["run_id"].(string)
	r = acpflow(t, dir, "resume", id, "--state", state)
	if r.code != 0 {
		t.Fatalf("resume %s: exit %d\n%s\n%s", id, r.code, r.stdout, r.stderr)
	}
	if s := acpflow(t, dir, "show", id, "--state", state); !strings.Contains(s.stdout, "demo agent received: after the gate") {
		t.Errorf("the resumed run's output:\n%s", s.stdout)
	}
}
