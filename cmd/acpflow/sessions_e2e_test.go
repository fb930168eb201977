package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sessionRun is what the tests of session continuation read of a run:
// each step's result and the events of its `--json` stream.
type sessionRun struct {
	code   int
	stderr string
	steps  map[string]map[string]any
	events []map[string]any
}

// runSessions runs a workflow with --json and --output in dir, with the
// demo agent's sessions kept in dir (so a fresh demo process can pick them
// up), and reads what it did.
func runSessions(t *testing.T, dir, wf string, args ...string) sessionRun {
	t.Helper()
	out := filepath.Join(dir, "out.jsonl")
	os.Remove(out)
	t.Setenv("ACPFLOW_DEMO_STATE", filepath.Join(dir, "demo-state"))
	r := acpflow(t, dir, append([]string{"run", wf, "--json", "--output", out, "--workspace", dir}, args...)...)
	sr := sessionRun{code: r.code, stderr: r.stderr, events: jsonEvents(t, r.stdout)}
	var res struct {
		Steps map[string]map[string]any `json:"steps"`
	}
	if b, err := os.ReadFile(out); err == nil {
		json.Unmarshal(b, &res)
	}
	sr.steps = res.Steps
	return sr
}

// updates lists the step_update events of one kind, by step.
func (r sessionRun) updates(kind string) map[string][]map[string]any {
	by := map[string][]map[string]any{}
	for _, e := range r.events {
		if e["type"] == "step_update" && e["kind"] == kind {
			step := fmt.Sprint(e["step"])
			by[step] = append(by[step], e)
		}
	}
	return by
}

func (r sessionRun) count(kind string) int {
	n := 0
	for _, list := range r.updates(kind) {
		n += len(list)
	}
	return n
}

func TestAStepContinuesAnEarlierStepsSessionOnItsLiveAgent(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: continue
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan the parser"}}
  - {id: build, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "Now build it", session: plan}}
  - {id: test, needs: [build], uses: acp-subagent, with: {agent: demo, prompt: "Now test it", session: build}}
`)
	r := runSessions(t, dir, wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if n := r.count("spawned"); n != 1 {
		t.Errorf("%d agents spawned; the three steps share one", n)
	}
	if n := r.count("teardown"); n != 1 {
		t.Errorf("%d teardowns, want the one agent's", n)
	}
	if out := fmt.Sprint(r.steps["build"]["output"]); !strings.Contains(out, "remembers 1 earlier prompt: Plan the parser") {
		t.Errorf("build did not continue plan's conversation: %q", out)
	}
	if out := fmt.Sprint(r.steps["test"]["output"]); !strings.Contains(out, "remembers 2 earlier prompts: Plan the parser | Now build it") {
		t.Errorf("test did not continue the conversation: %q", out)
	}
	sid := r.steps["plan"]["session_id"]
	for _, id := range []string{"build", "test"} {
		if r.steps[id]["session_id"] != sid {
			t.Errorf("%s used session %v, want plan's %v", id, r.steps[id]["session_id"], sid)
		}
		if s := r.updates("session")[id]; len(s) != 1 || s[0]["via"] != "continued" {
			t.Errorf("%s's session event = %v, want one with via continued", id, s)
		}
	}
	// The agent lives until the last step that continues it has settled.
	var testEnd, teardown int
	for i, e := range r.events {
		if e["type"] == "step_end" && e["step"] == "test" {
			testEnd = i
		}
		if e["kind"] == "teardown" {
			teardown = i
		}
	}
	if teardown < testEnd {
		t.Errorf("the agent was torn down (event %d) before the last step that continues it ended (event %d)", teardown, testEnd)
	}
}

func TestForkedStepsBranchOneSessionInParallel(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: fork
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan the release"}}
  - {id: docs, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "Write the docs", session: plan, fork: true}}
  - {id: notes, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "Write the notes", session: plan, fork: true}}
`)
	r := runSessions(t, dir, wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if n := r.count("spawned"); n != 1 {
		t.Errorf("%d agents spawned; forks branch the live one", n)
	}
	seen := map[any]string{r.steps["plan"]["session_id"]: "plan"}
	for _, id := range []string{"docs", "notes"} {
		out := fmt.Sprint(r.steps[id]["output"])
		if !strings.Contains(out, "remembers 1 earlier prompt: Plan the release") {
			t.Errorf("%s does not start from plan's conversation: %q", id, out)
		}
		sid := r.steps[id]["session_id"]
		if other, dup := seen[sid]; dup {
			t.Errorf("%s has the session of %s (%v); a fork has its own", id, other, sid)
		}
		seen[sid] = id
		if s := r.updates("session")[id]; len(s) != 1 || s[0]["via"] != "forked" || s[0]["from"] != "plan" {
			t.Errorf("%s's session event = %v, want via forked from plan", id, s)
		}
	}
}

func TestAContinuationAfterResumePicksTheSessionUpOnAFreshAgent(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	// build fails the first time: its answer passes max-output, so its
	// turn is cancelled and the agent, in an unknown state, torn down.
	body := `name: resumable
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan the parser"}}
  - {id: build, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "Now build it", session: plan, max-output: 10}}
`
	wf := writeWorkflow(t, dir, body)
	first := runSessions(t, dir, wf, "--state", state)
	if first.code != 1 {
		t.Fatalf("first run: exit %d, want 1 (build's output passes max-output)\n%s", first.code, first.stderr)
	}
	if n := first.count("teardown"); n != 1 {
		t.Errorf("%d teardowns in the first run, want the one agent's", n)
	}
	var runID string
	for _, e := range first.events {
		if e["type"] == "run_start" {
			runID = fmt.Sprint(e["run_id"])
		}
	}
	writeWorkflow(t, dir, strings.Replace(body, ", max-output: 10", "", 1))
	r := acpflow(t, dir, "resume", runID, "--state", state, "--json", "--force")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	var via, output string
	for _, e := range jsonEvents(t, r.stdout) {
		if e["step"] == "build" && e["kind"] == "session" {
			via = fmt.Sprint(e["via"])
		}
		if e["step"] == "build" && e["kind"] == "agent_message_chunk" {
			output += fmt.Sprint(e["text"])
		}
	}
	if via != "resumed" {
		t.Errorf("build's session came %q, want resumed (the demo agent advertises session/resume)", via)
	}
	// Plan's prompt is remembered; the failed attempt's may be too, or
	// not, as the agent saved it before it was torn down or not.
	if !regexp.MustCompile(`remembers \d earlier prompts?: Plan the parser`).MatchString(output) {
		t.Errorf("build did not continue plan's conversation after resume: %q", output)
	}
}

func TestAKeptAgentIsTornDownWhenTheStepThatWouldContinueItIsSkipped(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: skipped
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan"}}
  - {id: build, needs: [plan], if: "false", uses: acp-subagent, with: {agent: demo, prompt: "Build", session: plan}}
  - {id: other, needs: [build], uses: acp-subagent, with: {agent: demo, prompt: "Other"}}
`)
	r := runSessions(t, dir, wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.steps["build"]["status"] != "skipped" {
		t.Fatalf("build = %v, want skipped", r.steps["build"]["status"])
	}
	if n := r.count("teardown"); n != 1 {
		t.Errorf("%d teardowns, want plan's agent torn down once", n)
	}
	// acpflow's own cleanup (assertNoProcessFrom) proves nothing is left.
}

func TestValidateChecksSessionReferences(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, steps, want string
	}{
		{"not an ancestor", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, uses: acp-subagent, with: {agent: demo, prompt: y, session: a}}`,
			`wf.yaml:7:73: step "b": with.session: step "a" must run before this one`},
		{"another agent", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, needs: [a], uses: acp-subagent, with: {agent: other, prompt: y, session: a}}`,
			`step "b": with.session: step "a" talks to agent "demo" and this step to "other"`},
		{"unknown step", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, needs: [a], uses: acp-subagent, with: {agent: demo, prompt: y, session: aa}}`,
			`with.session: unknown step "aa"; did you mean "a"?`},
		{"a for-each", `
  - {id: a, for-each: "[1, 2]", uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, needs: [a], uses: acp-subagent, with: {agent: demo, prompt: y, session: a}}`,
			`step "a" is a for-each step`},
		{"fork without session", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x, fork: true}}`,
			`with.fork needs with.session`},
		{"a cwd of its own", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, needs: [a], uses: acp-subagent, with: {agent: demo, prompt: y, session: a, cwd: sub}}`,
			`with.cwd: a step that continues a session runs in the directory the session began in`},
		{"an expression", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: x}}
  - {id: b, needs: [a], uses: acp-subagent, with: {agent: demo, prompt: y, session: "${{ inputs.s }}"}}`,
			`with.session must name a step as written`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wf := writeWorkflow(t, dir, "name: bad\nagents:\n  demo: {builtin: demo}\n  other: {builtin: demo}\nsteps:"+c.steps+"\n")
			r := acpflow(t, dir, "validate", wf)
			if r.code != 2 || !strings.Contains(r.stderr+r.stdout, c.want) {
				t.Errorf("exit %d, want 2 with %q:\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
		})
	}
}

func TestReusedAgentsServeABatchWithFewProcesses(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: reuse
inputs:
  n: {type: number}
agents:
  demo: {builtin: demo, reuse: true}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "Item ${{ inputs.n }}"}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: demo, prompt: "Again ${{ inputs.n }}"}}
`)
	var lines strings.Builder
	for i := range 8 {
		fmt.Fprintf(&lines, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "inputs.jsonl")
	os.WriteFile(inputs, []byte(lines.String()), 0o644)
	t.Setenv("ACPFLOW_DEMO_STATE", filepath.Join(dir, "demo-state"))
	r := acpflow(t, dir, "run", wf, "--inputs", inputs, "--concurrency", "2", "--json", "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	spawned, reused, teardowns, sessions := 0, 0, 0, map[any]bool{}
	for _, e := range jsonEvents(t, r.stdout) {
		switch e["kind"] {
		case "spawned":
			spawned++
		case "reused":
			reused++
		case "teardown":
			teardowns++
		case "session":
			sessions[e["session_id"]] = true
		}
		if e["type"] == "step_end" && e["status"] != "succeeded" {
			t.Errorf("step %v of run %v: %v", e["step"], e["run_id"], e["error"])
		}
	}
	if spawned > 2 || spawned == 0 {
		t.Errorf("%d agents spawned for 16 steps at concurrency 2; reuse keeps at most 2", spawned)
	}
	if spawned+reused != 16 {
		t.Errorf("spawned %d + reused %d, want 16 steps' agents", spawned, reused)
	}
	if teardowns != spawned {
		t.Errorf("%d teardowns for %d agents", teardowns, spawned)
	}
	if len(sessions) != 16 {
		t.Errorf("%d distinct sessions, want one per step (16)", len(sessions))
	}
	for _, e := range jsonEvents(t, r.stdout) {
		if e["kind"] == "agent_message_chunk" && strings.Contains(fmt.Sprint(e["text"]), "remembers") {
			t.Errorf("a reused agent's new session remembered another step's prompt: %v", e["text"])
		}
	}
}

func TestForEachElementsContinuingOneSessionTakeTurns(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: turns
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan"}}
  - id: each
    needs: [plan]
    for-each: "['a', 'b', 'c']"
    uses: acp-subagent
    with: {agent: demo, prompt: "Item ${{ item }}", session: plan}
`)
	r := runSessions(t, dir, wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Each element's turn came after the ones before it on the same
	// session, so between them they remember 1, 2 and 3 earlier prompts.
	seen := map[string]bool{}
	for _, out := range r.steps["each"]["output"].([]any) {
		for _, n := range []string{"1 earlier prompt:", "2 earlier prompts:", "3 earlier prompts:"} {
			if strings.Contains(fmt.Sprint(out), "remembers "+n) {
				seen[n] = true
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("the elements remembered %v; three turns on one session remember 1, 2 and 3 earlier prompts:\n%v", seen, r.steps["each"]["output"])
	}
	if n := r.count("spawned"); n != 1 {
		t.Errorf("%d agents spawned, want 1", n)
	}
}

func TestContinuingWithoutResumeOrLoadFailsNamingTheCapability(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	body := fmt.Sprintf(`name: nocap
agents:
  a: {command: %s}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: a, prompt: "Plan"}}
  - {id: build, needs: [plan], uses: acp-subagent, with: {agent: a, prompt: "Build", session: plan, max-output: 2}}
`, testAgent)
	wf := writeWorkflow(t, dir, body)
	first := runSessions(t, dir, wf, "--state", state)
	if first.code != 1 {
		t.Fatalf("first run: exit %d, want 1\n%s", first.code, first.stderr)
	}
	var runID string
	for _, e := range first.events {
		if e["type"] == "run_start" {
			runID = fmt.Sprint(e["run_id"])
		}
	}
	writeWorkflow(t, dir, strings.Replace(body, ", max-output: 2", "", 1))
	r := acpflow(t, dir, "resume", runID, "--state", state, "--force")
	want := "agent a cannot continue the session of step plan: its process is gone and the agent advertises neither session/resume nor loadSession"
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("resume: exit %d, want 1 with %q:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}

func TestAContinuingStepRunsInTheDirectoryItsSessionBeganIn(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	state := filepath.Join(dir, "demo-state")
	wf := writeWorkflow(t, dir, `name: cwd
agents:
  demo: {builtin: demo, env: {ACPFLOW_DEMO_STATE: "`+state+`"}}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "Plan", cwd: sub}}
  - {id: build, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "Build", session: plan}}
  - {id: docs, needs: [build], uses: acp-subagent, with: {agent: demo, prompt: "Docs", session: build, fork: true}}
`)
	r := runSessions(t, dir, wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// The fork's cwd is the one acpflow sent in session/fork, which the
	// demo saved with the session.
	b, err := os.ReadFile(filepath.Join(state, fmt.Sprint(r.steps["docs"]["session_id"])+".json"))
	if err != nil {
		t.Fatalf("the demo did not save the fork: %v", err)
	}
	if !strings.Contains(string(b), filepath.Join(dir, "sub")) {
		t.Errorf("the fork was opened outside plan's cwd %s: %s", filepath.Join(dir, "sub"), b)
	}
}
