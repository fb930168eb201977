package main

// End to end: agents that decide alone (issue 21), through the real
// binary on workflow files, against the test agent: a tool call that runs
// without asking, a switch to a mode in which the agent decides alone,
// and a failed model call reported as text.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// aloneRun is one run of a one-step workflow on the test agent with the
// given agent args, agent keys and policies; it returns the exit, the
// step's result and the --json events.
type aloneRun struct {
	r      result
	step   map[string]any
	events []map[string]any
	record string
}

func runAlone(t *testing.T, agentKeys, policies string, args ...string) aloneRun {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	body := fmt.Sprintf("name: alone\nagents:\n  a:\n    command: %s\n    args: %s\n%s\n", testAgent,
		agentArgs(append([]string{"-record", record}, args...)...), prefixLines(agentKeys, "    "))
	if policies != "" {
		body += "policies:\n" + prefixLines(policies, "  ") + "\n"
	}
	body += "steps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n"
	wf := writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", filepath.Join(dir, "state.db"))
	res := aloneRun{r: r, record: record}
	if b, err := os.ReadFile(out); err == nil {
		var run struct {
			Steps map[string]map[string]any `json:"steps"`
		}
		if err := json.Unmarshal(b, &run); err != nil {
			t.Fatalf("result %q: %v", b, err)
		}
		res.step = run.Steps["s"]
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			res.events = append(res.events, e)
		}
	}
	if _, err := os.Stat(record); err == nil {
		assertAgentsGone(t, record)
	}
	return res
}

func (a aloneRun) permissions() []map[string]any {
	var out []map[string]any
	list, _ := a.step["permissions"].([]any)
	for _, p := range list {
		out = append(out, p.(map[string]any))
	}
	return out
}

func (a aloneRun) eventsOf(typ, kind string) []map[string]any {
	var out []map[string]any
	for _, e := range a.events {
		if e["type"] == typ && (kind == "" || e["kind"] == kind) {
			out = append(out, e)
		}
	}
	return out
}

// A tool call that runs without asking is judged as if it had asked: the
// class is "an execute, edit, delete or move call whose tool_call_update
// reports completed with no permission request for its id".
func TestAToolCallThatRanUnaskedIsJudgedAsIfItHadAsked(t *testing.T) {
	t.Run("under reject it fails the step, naming the call", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-unasked", "execute:rm -rf build")
		if a.r.code != 1 || a.step["status"] != "failed" {
			t.Fatalf("exit %d, step %v; want exit 1 and a failed step\n%s", a.r.code, a.step["status"], a.r.stderr)
		}
		if e, _ := a.step["error"].(string); !strings.Contains(e, `"rm -rf build"`) || !strings.Contains(e, "without asking") || !strings.Contains(e, "would reject") {
			t.Errorf("error %q does not name the call and what the policy would do", e)
		}
		perms := a.permissions()
		if len(perms) != 1 || perms[0]["decision"] != "unasked" || perms[0]["would"] != "reject" || perms[0]["command"] != "rm -rf build" || perms[0]["rule"] != "shorthand" {
			t.Errorf("permissions %v; want one unasked record that would reject by the shorthand", perms)
		}
		if len(a.eventsOf("unasked", "")) != 1 {
			t.Errorf("want one unasked event, got %v", a.eventsOf("unasked", ""))
		}
	})
	t.Run("a call the rules allow is recorded and the turn goes on", func(t *testing.T) {
		a := runAlone(t, "", "permission:\n  rules:\n    - {if: 'tool.command startsWith \"ls\"', then: allow}\n  default: reject", "-unasked", "execute:ls -la")
		if a.r.code != 0 || a.step["status"] != "succeeded" {
			t.Fatalf("exit %d, step %v\n%s", a.r.code, a.step["status"], a.r.stderr)
		}
		if p := a.permissions(); len(p) != 1 || p[0]["decision"] != "unasked" || p[0]["would"] != "allow" || p[0]["rule"] != "1" {
			t.Errorf("permissions %v; want one unasked record that would allow by rule 1", p)
		}
	})
	t.Run("unasked: record records a call the policy would reject", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject\nunasked: record", "-unasked", "edit:/etc/passwd")
		if a.r.code != 0 || a.step["status"] != "succeeded" {
			t.Fatalf("exit %d, step %v\n%s", a.r.code, a.step["status"], a.r.stderr)
		}
		if p := a.permissions(); len(p) != 1 || p[0]["would"] != "reject" {
			t.Errorf("permissions %v", p)
		}
	})
	t.Run("under allow it is recorded, not failed", func(t *testing.T) {
		a := runAlone(t, "", "permission: allow", "-unasked", "delete:build")
		if a.r.code != 0 {
			t.Fatalf("exit %d\n%s", a.r.code, a.r.stderr)
		}
		if p := a.permissions(); len(p) != 1 || p[0]["decision"] != "unasked" || p[0]["would"] != "allow" {
			t.Errorf("permissions %v", p)
		}
	})
	t.Run("a call announced in progress before it asks is not unasked", func(t *testing.T) {
		a := runAlone(t, "", "permission: allow", "-announce-first", "-permission", "edit:/ws/patch.txt")
		if a.r.code != 0 {
			t.Fatalf("exit %d\n%s", a.r.code, a.r.stderr)
		}
		if p := a.permissions(); len(p) != 1 || p[0]["decision"] != "allow" {
			t.Errorf("permissions %v; want the one request, allowed, and no unasked record", p)
		}
	})
	t.Run("a read runs alone without a record", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-unasked", "read:README.md")
		if a.r.code != 0 || len(a.permissions()) != 0 {
			t.Fatalf("exit %d, permissions %v\n%s", a.r.code, a.permissions(), a.r.stderr)
		}
	})
	t.Run("show prints it", func(t *testing.T) {
		dir := t.TempDir()
		wf := writeWorkflow(t, dir, fmt.Sprintf("name: alone\nagents:\n  a: {command: %s, args: %s}\npolicies: {permission: reject, unasked: record}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n",
			testAgent, agentArgs("-unasked", "execute:rm -rf build")))
		state := filepath.Join(dir, "state.db")
		out := filepath.Join(dir, "out.jsonl")
		r := acpflow(t, dir, "run", wf, "--state", state, "--output", out)
		if r.code != 0 || !strings.Contains(r.stdout, `unasked execute "rm -rf build": ran without asking; the policy would reject`) {
			t.Fatalf("exit %d; run printed:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		shown := acpflow(t, dir, "show", runID(t, out), "--state", state)
		if !strings.Contains(shown.stdout, `unasked execute "rm -rf build": ran without asking; the policy would reject (workflow policy, rule shorthand)`) {
			t.Errorf("show printed:\n%s", shown.stdout)
		}
		tr := acpflow(t, dir, "show", runID(t, out), "--transcript", "--state", state)
		if !strings.Contains(tr.stdout, "unasked: ran without asking; the policy would reject (workflow policy, rule shorthand)") {
			t.Errorf("show --transcript printed:\n%s", tr.stdout)
		}
	})
}

// The mode guard: the class is "a session whose current mode (from
// session/new or current_mode_update) is one in which the agent decides
// alone, under any policy but allow".
func TestTheModeGuardSetsADecideAloneModeBackOrFailsTheStep(t *testing.T) {
	t.Run("a switch mid-turn is set back to the agent's mode", func(t *testing.T) {
		a := runAlone(t, "mode: default", "permission: reject", "-modes", "default,auto", "-switch-mode", "auto")
		if a.r.code != 0 || a.step["status"] != "succeeded" {
			t.Fatalf("exit %d, step %v: %v\n%s", a.r.code, a.step["status"], a.step["error"], a.r.stderr)
		}
		if out, _ := a.step["output"].(string); !strings.Contains(out, "mode set back") {
			t.Errorf("output %q: the agent never saw session/set_mode", out)
		}
		if ev := a.eventsOf("step_update", "mode_restored"); len(ev) != 1 || ev[0]["from"] != "auto" || ev[0]["to"] != "default" {
			t.Errorf("mode_restored events %v", ev)
		}
		if n := countRecorded(t, a.record, "set_mode"); n != 1 {
			t.Errorf("%d session/set_mode, want 1 (the restore)", n)
		}
	})
	t.Run("a switch the agent will not undo fails the step, naming the mode", func(t *testing.T) {
		a := runAlone(t, "mode: default", "permission: reject", "-modes", "default,bypassPermissions", "-switch-mode", "bypassPermissions", "-refuse-set-mode", "-prompt-delay", "3s")
		if a.r.code != 1 || a.step["status"] != "failed" {
			t.Fatalf("exit %d, step %v\n%s", a.r.code, a.step["status"], a.r.stderr)
		}
		if e, _ := a.step["error"].(string); !strings.Contains(e, `mode "bypassPermissions"`) {
			t.Errorf("error %q does not name the mode", e)
		}
	})
	t.Run("a session that starts in auto is set back before the prompt", func(t *testing.T) {
		a := runAlone(t, "mode: default", "permission: reject", "-modes", "auto,default")
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		if n := countRecorded(t, a.record, "set_mode"); n != 1 {
			t.Errorf("%d session/set_mode, want 1", n)
		}
	})
	t.Run("with no mode to go back to the step fails before the prompt", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-modes", "yolo,default")
		if a.r.code != 1 || !strings.Contains(fmt.Sprint(a.step["error"]), `mode "yolo"`) {
			t.Fatalf("exit %d, error %v", a.r.code, a.step["error"])
		}
		if n := countRecorded(t, a.record, "prompt"); n != 0 {
			t.Errorf("the agent was prompted %d times in a mode that decides alone", n)
		}
	})
	t.Run("under allow nothing is guarded", func(t *testing.T) {
		a := runAlone(t, "", "permission: allow", "-modes", "yolo,default", "-switch-mode", "yolo", "-prompt-delay", "10ms")
		if a.r.code != 0 || countRecorded(t, a.record, "set_mode") != 0 {
			t.Fatalf("exit %d, %d set_mode", a.r.code, countRecorded(t, a.record, "set_mode"))
		}
	})
	t.Run("an agent whose mode is a config option gets mode: through it", func(t *testing.T) {
		a := runAlone(t, "mode: plan", "permission: reject", "-config-option", "mode=build|plan")
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		sets := agentrecord.Named(a.record, "set_config_option")
		if len(sets) != 1 || !strings.Contains(fmt.Sprint(sets[0]["params"]), "plan") {
			t.Errorf("set_config_option %v; want one, to plan", sets)
		}
	})
	t.Run("a mode: that a ${{ }} renders to such a mode fails the step before the prompt", func(t *testing.T) {
		dir := t.TempDir()
		record := filepath.Join(dir, "record.jsonl")
		wf := writeWorkflow(t, dir, fmt.Sprintf("name: m\ninputs:\n  m: {type: string, default: bypassPermissions}\nagents:\n  a:\n    command: %s\n    args: %s\n    mode: ${{ inputs.m }}\npolicies: {permission: reject}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n",
			testAgent, agentArgs("-record", record, "-modes", "default,bypassPermissions")))
		r := acpflow(t, dir, "run", wf, "--state", filepath.Join(dir, "state.db"))
		if r.code != 1 || !strings.Contains(r.stdout, `mode "bypassPermissions" lets it run commands`) {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if n := countRecorded(t, record, "prompt"); n != 0 {
			t.Errorf("the agent was prompted %d times in a mode that decides alone", n)
		}
	})
	t.Run("naming such a mode under reject is invalid", func(t *testing.T) {
		dir := t.TempDir()
		wf := writeWorkflow(t, dir, "name: m\nagents:\n  a: {preset: claude, mode: bypassPermissions}\npolicies: {permission: reject}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n")
		r := acpflow(t, dir, "validate", wf)
		if r.code != 2 || !strings.Contains(r.stderr, `mode "bypassPermissions" lets agent "a" run commands`) {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
	})
}

// A failed model call that the agent reports as text and end_turn
// (codex-acp's systemError) fails the step with the message.
func TestAModelErrorReportedAsTextFailsTheStep(t *testing.T) {
	a := runAlone(t, "", "permission: reject", "-system-error", "stream error: 500 Internal Server Error")
	if a.r.code != 1 || a.step["status"] != "failed" {
		t.Fatalf("exit %d, step %v\n%s", a.r.code, a.step["status"], a.r.stderr)
	}
	if e, _ := a.step["error"].(string); !strings.Contains(e, "stream error: 500 Internal Server Error") || !strings.Contains(e, "failed model call") {
		t.Errorf("error %q lacks the agent's message", e)
	}
	if f, _ := a.step["final"].(string); strings.Contains(f, "500 Internal Server Error") {
		t.Errorf("final %q is the error's body; the error is the step's error, not its answer", f)
	}
}

// prefixLines puts prefix before each line of s ("" stays "").
func prefixLines(s, prefix string) string {
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// countRecorded counts the test agent's recorded events of a type.
func countRecorded(t *testing.T, record, event string) int {
	t.Helper()
	return len(agentrecord.Named(record, event))
}

// auth: is checked against the methods the agent advertises before
// authenticate is called: the class is "a method it does not offer (the
// error lists those it does), and a preset's old id for one it offers
// (mapped, with a warning)".
func TestAuthIsCheckedAgainstTheAgentsMethods(t *testing.T) {
	t.Run("a method the agent does not offer fails, listing those it does", func(t *testing.T) {
		a := runAlone(t, "auth: login-please", "permission: reject", "-require-auth", "api-key")
		if a.r.code != 1 {
			t.Fatalf("exit %d", a.r.code)
		}
		if e := fmt.Sprint(a.step["error"]); !strings.Contains(e, `auth "login-please" is not a method the agent offers (offered: api-key)`) {
			t.Errorf("error %q", e)
		}
		if n := len(agentrecord.Named(a.record, "authenticate")); n != 0 {
			t.Errorf("authenticate was called %d times", n)
		}
	})
	t.Run("a preset's old id is mapped to today's, with a warning", func(t *testing.T) {
		a := runAlone(t, "preset: codex\nauth: codex-api-key", "permission: reject", "-require-auth", "api-key", "-modes", "read-only,agent")
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		w := a.eventsOf("step_update", "warning")
		if len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]["message"]), `auth "codex-api-key" is the adapter's old name for "api-key"`) {
			t.Errorf("warnings %v", w)
		}
	})
}
