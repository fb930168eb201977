package main

// End to end: the permission requests acpflow answers for no step's turn,
// and the session ids an agent gives, through the real binary on workflow
// files, against the test agent (issue 23: every request acpflow answers
// is recorded; session ids are unique per step).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unownedRun is what a run of these tests did: its exit, its result
// (steps and the run's own permissions), its --json events, and the test
// agent's records.
type unownedRun struct {
	r      result
	steps  map[string]map[string]any
	perms  []map[string]any // the run's own
	events []map[string]any
	record string
}

// runUnowned runs the workflow body in a fresh directory, with RECORD in
// the body replaced by the test agent's record file and AGENT by its path,
// and proves afterwards that every process the agent recorded is gone.
func runUnowned(t *testing.T, body string, args ...string) unownedRun {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	body = strings.NewReplacer("RECORD", record, "AGENT", testAgent).Replace(body)
	wf := writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, append([]string{"run", wf, "--json", "--output", out, "--workspace", dir, "--state", filepath.Join(dir, "state.db")}, args...)...)
	u := unownedRun{r: r, record: record, events: jsonEvents(t, r.stdout)}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result: %v\n%s", err, r.stderr)
	}
	var res struct {
		Steps       map[string]map[string]any `json:"steps"`
		Permissions []map[string]any          `json:"permissions"`
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	u.steps, u.perms = res.Steps, res.Permissions
	assertAgentsGone(t, record)
	return u
}

// stepPerms are a step's permission records.
func (u unownedRun) stepPerms(step string) []map[string]any {
	var out []map[string]any
	list, _ := u.steps[step]["permissions"].([]any)
	for _, p := range list {
		out = append(out, p.(map[string]any))
	}
	return out
}

// permissionEvents are the `permission` events of step ("" for the run's).
func (u unownedRun) permissionEvents(step string) []map[string]any {
	var out []map[string]any
	for _, e := range u.events {
		if e["type"] == "permission" && e["step"] == step {
			out = append(out, e)
		}
	}
	return out
}

// answersTo are the answers the agent got to its requests for toolCall.
func (u unownedRun) answersTo(toolCall string) []string {
	var out []string
	for _, r := range readRecords(nil, u.record) {
		if r["event"] == "permission_answer" && r["tool_call_id"] == toolCall {
			b, _ := json.Marshal(r["result"])
			out = append(out, string(b))
		}
	}
	return out
}

// withRule is the one record of list with rule, or nil.
func withRule(list []map[string]any, rule string) map[string]any {
	var found map[string]any
	for _, p := range list {
		if p["rule"] == rule {
			if found != nil {
				return nil
			}
			found = p
		}
	}
	return found
}

// checkCancelled checks that a record says acpflow answered `cancelled`
// itself, for the reason given.
func checkCancelled(t *testing.T, where string, rec map[string]any, reason string) {
	t.Helper()
	if rec == nil {
		t.Fatalf("%s: no such record", where)
	}
	if rec["decision"] != "cancel" || rec["outcome"] != "cancelled" || rec["option_id"] != "" {
		t.Errorf("%s: %v, want decision cancel, outcome cancelled", where, rec)
	}
	if r, _ := rec["reason"].(string); !strings.Contains(r, reason) {
		t.Errorf("%s: reason %q does not say %q", where, rec["reason"], reason)
	}
}

const strayAgent = `agents:
  a: {command: AGENT, args: %s}
`

// Every permission request acpflow answers is recorded: the step's, or,
// when no step's turn owns it, the run's; each as an event too, with the
// reason it was answered `cancelled`. The class of input: a request whose
// session id no turn's client owns when it comes, for each way that can
// be: a session the process never had, the session about to be opened
// (before session/new answers), another step's session on a reused agent,
// a kept session between two turns, and a step's session after its turn
// ended (at teardown's session/close, and after stdin's EOF).
func TestEveryPermissionRequestAcpflowAnswersIsRecorded(t *testing.T) {
	t.Run("a session the agent never had, during a step's turn, is the step's", func(t *testing.T) {
		u := runUnowned(t, "name: ghost\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD", "-permission", "execute:make", "-permission-session", "ghost-1"))+`policies: {permission: allow}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: go}}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		checkCancelled(t, "s's record", withRule(u.stepPerms("s"), "other-session"), `request for session "ghost-1", which is not the step's`)
		if ev := withRule(u.permissionEvents("s"), "other-session"); ev == nil {
			t.Errorf("no permission event of step s for it: %v", u.events)
		}
		if len(u.perms) != 0 {
			t.Errorf("the run recorded %v too", u.perms)
		}
	})

	t.Run("the session about to be opened, before session/new answers, is the step's", func(t *testing.T) {
		u := runUnowned(t, "name: early\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD", "-stray-permission", "session/new"))+`policies: {permission: allow}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: go}}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		checkCancelled(t, "s's record", withRule(u.stepPerms("s"), "session-not-open"), "before the step's own session was open")
		if withRule(u.permissionEvents("s"), "session-not-open") == nil {
			t.Errorf("no permission event of step s for it")
		}
		if a := u.answersTo("stray_session/new"); len(a) != 1 || !strings.Contains(a[0], `"cancelled"`) {
			t.Errorf("the agent was answered %v, want cancelled", a)
		}
	})

	t.Run("another step's session on a reused agent is the run's", func(t *testing.T) {
		u := runUnowned(t, "name: reused\n"+`agents:
  a: {command: AGENT, reuse: true, args: `+agentArgs("-record", "RECORD", "-permission", "execute:make", "-permission-session", "previous")+`}
policies: {permission: allow}
steps:
  - {id: one, uses: acp-subagent, with: {agent: a, prompt: go}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: a, prompt: go}}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		if n := len(readRecordsNamed(u.record, "start")); n != 1 {
			t.Fatalf("%d agents started, want one reused", n)
		}
		// one asks for a session the agent never had, two for one's.
		checkCancelled(t, "one's record", withRule(u.stepPerms("one"), "other-session"), `"ta-no-previous-session"`)
		checkCancelled(t, "the run's record", withRule(u.perms, "turn-ended"),
			fmt.Sprintf("request for the session of step one (%q) after its turn ended", u.steps["one"]["session_id"]))
		if len(u.stepPerms("two")) != 0 {
			t.Errorf("two recorded %v; the request was for one's session", u.stepPerms("two"))
		}
		if withRule(u.permissionEvents(""), "turn-ended") == nil {
			t.Errorf("no run permission event for it")
		}
	})

	t.Run("a kept session between two turns is the run's", func(t *testing.T) {
		// docs forks plan's session while build waits to continue it: the
		// agent asks for plan's session as it forks.
		u := runUnowned(t, "name: between\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD",
			"-capabilities", `{"sessionCapabilities": {"fork": {}}}`, "-stray-permission", "session/fork"))+`policies: {permission: allow}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: a, prompt: plan}}
  - {id: docs, needs: [plan], uses: acp-subagent, with: {agent: a, prompt: docs, session: plan, fork: true}}
  - {id: build, needs: [docs], uses: acp-subagent, with: {agent: a, prompt: build, session: plan}}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		checkCancelled(t, "the run's record", withRule(u.perms, "between-turns"),
			fmt.Sprintf("request for the session of step plan (%q), kept for a later step, between turns", u.steps["plan"]["session_id"]))
		if withRule(u.permissionEvents(""), "between-turns") == nil {
			t.Errorf("no run permission event for it")
		}
		for _, s := range []string{"plan", "docs", "build"} {
			if len(u.stepPerms(s)) != 0 {
				t.Errorf("%s recorded %v", s, u.stepPerms(s))
			}
		}
		if a := u.answersTo("stray_session/fork"); len(a) != 1 || !strings.Contains(a[0], `"cancelled"`) {
			t.Errorf("the agent was answered %v, want cancelled", a)
		}
	})

	for _, moment := range []struct{ name, flag, caps string }{
		{"at teardown's session/close", "session/close", `{"sessionCapabilities": {"close": {}}}`},
		{"after stdin's EOF", "eof", `{}`},
	} {
		t.Run("a step's session after its turn ended, "+moment.name+", is the run's", func(t *testing.T) {
			u := runUnowned(t, "name: ended\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD",
				"-capabilities", moment.caps, "-stray-permission", moment.flag))+`policies: {permission: allow}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: go}}
`)
			if u.r.code != 0 {
				t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
			}
			checkCancelled(t, "the run's record", withRule(u.perms, "turn-ended"),
				fmt.Sprintf("request for the session of step s (%q) after its turn ended", u.steps["s"]["session_id"]))
			if withRule(u.permissionEvents(""), "turn-ended") == nil {
				t.Errorf("no run permission event for it")
			}
			if len(u.stepPerms("s")) != 0 {
				t.Errorf("s recorded %v", u.stepPerms("s"))
			}
		})
	}
}

// readRecordsNamed are the test agent's records of one event.
func readRecordsNamed(path, event string) []map[string]any {
	var out []map[string]any
	for _, r := range readRecords(nil, path) {
		if r["event"] == event {
			out = append(out, r)
		}
	}
	return out
}

// A session id is one step's: an agent that answers session/fork or
// session/new with an id a step has, or had, fails the step that asked,
// with an error that names whose id it is, and the other step goes on
// with its session. The class of input: an id the agent gives for a new
// session that is the session forked, another live step's, one a step of
// the run had before on another process, or one the same pooled process
// gave before (within a run, and to another run of a batch).
func TestASessionIDIsOneStepsOrTheStepFails(t *testing.T) {
	forks := `{"sessionCapabilities": {"fork": {}}}`

	t.Run("a fork answered with the id of the session forked", func(t *testing.T) {
		// build continues plan's session after docs' fork failed: the
		// agent's request on it is build's, decided by build's policy.
		u := runUnowned(t, "name: parent\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD",
			"-capabilities", forks, "-fork-session-id", "parent", "-permission", "execute:make"))+`policies: {permission: reject}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: a, prompt: plan}}
  - {id: docs, needs: [plan], continue-on-error: true, uses: acp-subagent, with: {agent: a, prompt: docs, session: plan, fork: true}}
  - id: build
    needs: [docs]
    uses: acp-subagent
    with: {agent: a, prompt: build, session: plan}
    policies: {permission: allow}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		plan := fmt.Sprint(u.steps["plan"]["session_id"])
		if u.steps["docs"]["status"] != "failed" {
			t.Fatalf("docs = %v, want failed", u.steps["docs"]["status"])
		}
		want := fmt.Sprintf("agent a answered session/fork with session id %q, which is the session it was asked to fork (step plan's): each step needs a session of its own", plan)
		if e := fmt.Sprint(u.steps["docs"]["error"]); !strings.Contains(e, want) {
			t.Errorf("docs' error %q, want %q", e, want)
		}
		if u.steps["build"]["status"] != "succeeded" || u.steps["build"]["session_id"] != plan {
			t.Errorf("build = %v on session %v, want succeeded on plan's %s", u.steps["build"]["status"], u.steps["build"]["session_id"], plan)
		}
		if p := u.stepPerms("build"); len(p) != 1 || p[0]["decision"] != "allow" || p[0]["policy"] != "step" {
			t.Errorf("build's records %v, want its own step policy's allow", p)
		}
		if len(u.stepPerms("docs")) != 0 {
			t.Errorf("docs recorded %v: build's request reached the failed fork", u.stepPerms("docs"))
		}
	})

	t.Run("two forks answered with one id", func(t *testing.T) {
		u := runUnowned(t, "name: twins\n"+fmt.Sprintf(strayAgent, agentArgs("-record", "RECORD",
			"-capabilities", forks, "-fork-session-id", "twin"))+`steps:
  - {id: plan, uses: acp-subagent, with: {agent: a, prompt: plan}}
  - {id: docs, needs: [plan], continue-on-error: true, uses: acp-subagent, with: {agent: a, prompt: docs, session: plan, fork: true}}
  - {id: notes, needs: [plan], continue-on-error: true, uses: acp-subagent, with: {agent: a, prompt: notes, session: plan, fork: true}}
`)
		if u.r.code != 0 {
			t.Fatalf("exit %d\n%s", u.r.code, u.r.stderr)
		}
		var failed, ok []string
		for _, s := range []string{"docs", "notes"} {
			if u.steps[s]["status"] == "failed" {
				failed = append(failed, s)
			} else if u.steps[s]["status"] == "succeeded" && u.steps[s]["session_id"] == "twin" {
				ok = append(ok, s)
			}
		}
		if len(failed) != 1 || len(ok) != 1 {
			t.Fatalf("failed %v, succeeded on twin %v; want one of each", failed, ok)
		}
		e := fmt.Sprint(u.steps[failed[0]]["error"])
		if !strings.Contains(e, `answered session/fork with session id "twin", which`) || !strings.Contains(e, "step "+ok[0]) {
			t.Errorf("%s's error %q does not name %s's session", failed[0], e, ok[0])
		}
	})

	t.Run("a fork answered with an id a step had earlier in the run, on another process", func(t *testing.T) {
		u := runUnowned(t, `name: earlier
agents:
  first: {command: AGENT, args: `+agentArgs("-record", "RECORD", "-session-id", "early-1")+`}
  a: {command: AGENT, args: `+agentArgs("-record", "RECORD", "-capabilities", forks, "-fork-session-id", "early-1")+`}
steps:
  - {id: first, uses: acp-subagent, with: {agent: first, prompt: go}}
  - {id: plan, needs: [first], uses: acp-subagent, with: {agent: a, prompt: plan}}
  - {id: docs, needs: [plan], uses: acp-subagent, with: {agent: a, prompt: docs, session: plan, fork: true}}
`)
		if u.r.code != 1 || u.steps["docs"]["status"] != "failed" || u.steps["plan"]["status"] != "succeeded" || u.steps["first"]["status"] != "succeeded" {
			t.Fatalf("exit %d, steps %v", u.r.code, u.steps)
		}
		want := `agent a answered session/fork with session id "early-1", which step first had earlier in the run`
		if e := fmt.Sprint(u.steps["docs"]["error"]); !strings.Contains(e, want) {
			t.Errorf("docs' error %q, want %q", e, want)
		}
	})

	t.Run("session/new answered on a pooled agent with the id it gave a step before", func(t *testing.T) {
		u := runUnowned(t, `name: pooled
agents:
  a: {command: AGENT, reuse: true, args: `+agentArgs("-record", "RECORD", "-session-id", "same")+`}
steps:
  - {id: one, uses: acp-subagent, with: {agent: a, prompt: go}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: a, prompt: go}}
`)
		if u.r.code != 1 || u.steps["one"]["status"] != "succeeded" || u.steps["two"]["status"] != "failed" {
			t.Fatalf("exit %d, one %v, two %v; want one succeeded, two failed\n%s", u.r.code, u.steps["one"]["status"], u.steps["two"]["status"], u.r.stderr)
		}
		want := `agent a answered session/new with session id "same", which the same process gave step one before`
		if e := fmt.Sprint(u.steps["two"]["error"]); !strings.Contains(e, want) {
			t.Errorf("two's error %q, want %q", e, want)
		}
		if u.steps["one"]["output"] != "Hello, world" {
			t.Errorf("one's output %q", u.steps["one"]["output"])
		}
	})

	t.Run("session/new answered on a pooled agent with the id it gave another run of the batch", func(t *testing.T) {
		dir := t.TempDir()
		record := filepath.Join(dir, "record.jsonl")
		wf := writeWorkflow(t, dir, `name: batch
inputs:
  n: {type: number}
agents:
  a: {command: `+testAgent+`, reuse: true, args: `+agentArgs("-record", record, "-session-id", "same")+`}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "item ${{ inputs.n }}"}}
`)
		inputs := filepath.Join(dir, "inputs.jsonl")
		os.WriteFile(inputs, []byte("{\"n\": 1}\n{\"n\": 2}\n"), 0o644)
		out := filepath.Join(dir, "out.jsonl")
		r := acpflow(t, dir, "run", wf, "--inputs", inputs, "--concurrency", "1", "--output", out, "--workspace", dir, "--state", filepath.Join(dir, "state.db"))
		assertAgentsGone(t, record)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1 (the second run's step fails)\n%s", r.code, r.stderr)
		}
		b, _ := os.ReadFile(out)
		var statuses []string
		var firstRun, errText string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var res struct {
				RunID string                    `json:"run_id"`
				Steps map[string]map[string]any `json:"steps"`
			}
			json.Unmarshal([]byte(line), &res)
			statuses = append(statuses, fmt.Sprint(res.Steps["s"]["status"]))
			if res.Steps["s"]["status"] == "succeeded" {
				firstRun = res.RunID
			} else {
				errText = fmt.Sprint(res.Steps["s"]["error"])
			}
		}
		if len(statuses) != 2 || firstRun == "" {
			t.Fatalf("statuses %v, want one succeeded and one failed", statuses)
		}
		want := fmt.Sprintf(`answered session/new with session id "same", which the same process gave step s of run %s before`, firstRun)
		if !strings.Contains(errText, want) {
			t.Errorf("error %q, want %q", errText, want)
		}
	})
}
