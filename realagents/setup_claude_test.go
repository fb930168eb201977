//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// claude-agent-acp 0.101.0 (Claude Code 2.1.318): its env (the model
// server's URL, a dummy key, quiet settings) is agentsetup's; what makes it
// ask (the ask rules in session/new's _meta, mode default set after
// session/new) is the preset's, applied by `preset: claude` as for a user.
func init() {
	turnAgents["claude"] = &turnAgent{name: "claude"}
}

// claudePermissions logs the step's permission records and returns their
// kinds, in order.
func claudePermissions(t *testing.T, step turnResult) (kinds []string) {
	t.Helper()
	for _, p := range step.Permissions {
		t.Logf("permission: kind %v command %q locations %v → %v/%v option %v would %v rule %v (%v)",
			p["kind"], p["command"], p["locations"], p["decision"], p["outcome"], p["option_id"], p["would"], p["rule"], p["reason"])
		kinds = append(kinds, fmt.Sprint(p["kind"]))
	}
	return kinds
}

// claudeNoneUnasked fails for every call recorded as run without asking.
func claudeNoneUnasked(t *testing.T, step turnResult, es []event) {
	t.Helper()
	for _, p := range step.Permissions {
		if p["decision"] == "unasked" {
			t.Errorf("a %v call ran without asking: %v", p["kind"], p)
		}
	}
	for _, e := range es {
		if e["type"] == "unasked" {
			t.Errorf("unasked event: %v", e)
		}
	}
}

// claudeModes returns the modes of the run's current_mode_update events,
// in order.
func claudeModes(es []event) []string {
	var modes []string
	for _, e := range es {
		if e["type"] != "step_update" || e["kind"] != "current_mode_update" {
			continue
		}
		if u, ok := e["update"].(map[string]any); ok {
			modes = append(modes, fmt.Sprint(u["currentModeId"]))
		}
	}
	return modes
}

func claudeFileIs(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s = %q, %v; want %q", filepath.Base(path), b, err, want)
	}
}

func TestClaudeCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "echo hi > shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: "written.txt", Content: "written by claude\n"}},
		{Say: "FINAL done"},
	}
	step, es, r, reqs := s.turn(needTurnAgent(t, "claude"), script, "Run the script.", "permission: allow", "")
	exited := time.Now()
	t.Logf("exit %d in %s; step %s/%s in %d ms; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.DurationMS, step.Output)
	// The wall from the model's last answer (its last text chunk, as
	// acpflow stamped it) to acpflow's exit: the turn's end, session/close,
	// teardown and the run's own end.
	for i := len(es) - 1; i >= 0; i-- {
		if es[i]["kind"] == "agent_message_chunk" {
			if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(es[i]["time"])); err == nil {
				t.Logf("from the last answer chunk to acpflow's exit: %s", exited.Sub(at).Round(time.Millisecond))
			}
			break
		}
	}
	for _, q := range reqs {
		t.Logf("model server: %s %s → reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	for _, e := range es {
		if e["type"] == "step_update" && (e["kind"] == "teardown" || e["kind"] == "current_mode_update") {
			t.Logf("event: %v", e)
		}
	}
	if r.code != 0 || step.Status != "succeeded" || step.StopReason != "completed" {
		t.Fatalf("exit %d, step %s/%s: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
	if !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("output %q lacks the final answer", step.Output)
	}
	claudeFileIs(t, filepath.Join(s.dir, "shell.txt"), "hi\n")
	claudeFileIs(t, filepath.Join(s.dir, "written.txt"), "written by claude\n")
	// Under the preset's ask rules Bash and Write ask; allow selects the
	// allow-once option, the only allow the rules leave.
	if kinds := claudePermissions(t, step); strings.Join(kinds, ",") != "execute,edit" {
		t.Fatalf("permission requests for %v, want execute (Bash) then edit (Write)", kinds)
	}
	for _, p := range step.Permissions {
		if p["decision"] != "allow" || p["outcome"] != "selected" || p["option_id"] != "allow-once" {
			t.Errorf("permission %v: want decision allow, outcome selected, option allow-once", p)
		}
	}
	if c := step.Permissions[0]["command"]; c != "echo hi > shell.txt" {
		t.Errorf("the execute record's command = %q, want the Bash command", c)
	}
	want := []any{map[string]any{"path": filepath.Join(s.dir, "written.txt"), "line": float64(0), "in_workspace": true}}
	if l := step.Permissions[1]["locations"]; !reflect.DeepEqual(l, want) {
		t.Errorf("the edit record's locations = %v, want %v", l, want)
	}
	n := 0
	for _, e := range es {
		if e["type"] == "permission" {
			n++
		}
	}
	if n != len(step.Permissions) {
		t.Errorf("%d permission events, %d records", n, len(step.Permissions))
	}
	claudeNoneUnasked(t, step, es)
}

// With `preset: claude` and no mode:, under permission: reject, a
// read-only command (ls), rm -rf build and a write each reach the policy
// as a permission request, and none of them runs.
func TestClaudeAsksBeforeEveryCommandAndWrite(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	script := modelserver.Script{
		{Say: "Listing.", Shell: "ls > listing.txt"},
		{Say: "Reading.", Shell: "ls"},
		{Say: "Cleaning.", Shell: "rm -rf build"},
		{Say: "Writing.", Write: &modelserver.Write{Path: "written.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	step, es, r, _ := s.turn(needTurnAgent(t, "claude"), script, "Run the script.", "permission: reject", "")
	t.Logf("exit %d in %s; step %s/%s: %s; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error), step.Output)
	if step.Status != "succeeded" || !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("step %s/%s, output %q: a rejection should not end claude's turn\nstderr:\n%s", step.Status, step.StopReason, step.Output, r.stderr)
	}
	claudeFileIs(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	for _, name := range []string{"listing.txt", "written.txt"} {
		if _, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
			t.Errorf("%s was written: a rejected call ran", name)
		}
	}
	if kinds := claudePermissions(t, step); strings.Join(kinds, ",") != "execute,execute,execute,edit" {
		t.Fatalf("permission requests for %v, want execute ×3 (ls > listing.txt, ls, rm) then edit", kinds)
	}
	for i, c := range []string{"ls > listing.txt", "ls", "rm -rf build"} {
		if got := step.Permissions[i]["command"]; got != c {
			t.Errorf("permission %d: command %q, want %q", i, got, c)
		}
	}
	for _, p := range step.Permissions {
		if p["decision"] != "reject" || p["option_id"] != "reject" {
			t.Errorf("permission %v: want decision reject, option reject", p)
		}
	}
	claudeNoneUnasked(t, step, es)
}

// Under the README's rules a read-only command reaches the policy and is
// allowed by the execute rule, rm -rf build is rejected by the rm rule, and
// a write outside the workspace falls to the default, reject.
func TestClaudeREADMERuleJudgesEveryCommandAndWrite(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	outside := t.TempDir()
	script := modelserver.Script{
		{Say: "Listing.", Shell: "ls"},
		{Say: "Cleaning.", Shell: "rm -rf build"},
		{Say: "Writing outside.", Write: &modelserver.Write{Path: filepath.Join(outside, "evil.txt"), Content: "evil\n"}},
		{Say: "FINAL done"},
	}
	step, es, r, _ := s.turn(needTurnAgent(t, "claude"), script, "Run the script.", readmeRules, "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
	claudeFileIs(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	if _, err := os.Stat(filepath.Join(outside, "evil.txt")); err == nil {
		t.Error("evil.txt was written outside the workspace")
	}
	if kinds := claudePermissions(t, step); strings.Join(kinds, ",") != "execute,execute,edit" {
		t.Fatalf("permission requests for %v, want execute (ls), execute (rm), edit", kinds)
	}
	want := []struct{ command, decision, rule string }{{"ls", "allow", "4"}, {"rm -rf build", "reject", "2"}, {"", "reject", ""}}
	for i, w := range want {
		p := step.Permissions[i]
		if w.command != "" && p["command"] != w.command {
			t.Errorf("permission %d: command %q, want %q", i, p["command"], w.command)
		}
		if p["decision"] != w.decision || (w.rule != "" && p["rule"] != w.rule) {
			t.Errorf("permission %d: %v; want %s by rule %q", i, p, w.decision, w.rule)
		}
	}
	claudeNoneUnasked(t, step, es)
}

// claudeTurnWith is s.turn with agent keys of its own (mode:, …) under the
// agent.
func (s *sandbox) claudeTurnWith(script modelserver.Script, policiesYAML, agentYAML string) (turnResult, []event, run) {
	s.t.Helper()
	srv, err := modelserver.Start(script)
	if err != nil {
		s.t.Fatal(err)
	}
	defer srv.Close()
	wf := fmt.Sprintf("name: turn\nagents:\n%s\npolicies:\n%s\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: \"Run the script.\"}\n",
		s.turnAgentYAML(needTurnAgent(s.t, "claude"), srv, agentYAML), indent(policiesYAML, "  "))
	path := s.writeWorkflowFile(wf)
	out := filepath.Join(s.dir, "results.jsonl")
	os.Remove(out)
	r := s.acpflow(4*time.Minute, "run", path, "--json", "--timeout", "180s",
		"--workspace", s.dir, "--state", filepath.Join(s.dir, "state.db"), "--output", out)
	var res struct {
		Steps map[string]turnResult `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil {
		s.t.Fatalf("no result in %s (exit %d): %v\nworkflow:\n%s\nstderr:\n%s", out, r.code, err, wf, r.stderr)
	}
	return res.Steps["s"], events(s.t, r.stdout), r
}

// Started in plan mode (which asks), allow_always on ExitPlanMode selects
// exit-plan-default (allow_once, "Yes, manually approve edits"), never
// exit-plan-auto or exit-plan-bypass: the session goes to mode default, and
// the command and the write after it still ask.
func TestClaudeAllowAlwaysOnExitPlanModeKeepsItAsking(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "The plan.", Plan: "1. Write a file.\n2. Run a command."},
		{Say: "Writing.", Write: &modelserver.Write{Path: "a.txt", Content: "a\n"}},
		{Say: "Running.", Shell: "echo b > b.txt"},
		{Say: "FINAL done"},
	}
	step, es, r := s.claudeTurnWith(script, "permission: allow_always", "mode: plan")
	t.Logf("exit %d in %s; step %s/%s: %s; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error), step.Output)
	if r.code != 0 || step.Status != "succeeded" {
		t.Errorf("exit %d, step %s/%s: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
	claudeFileIs(t, filepath.Join(s.dir, "a.txt"), "a\n")
	claudeFileIs(t, filepath.Join(s.dir, "b.txt"), "b\n")
	if kinds := claudePermissions(t, step); strings.Join(kinds, ",") != "switch_mode,edit,execute" {
		t.Fatalf("permission requests for %v, want switch_mode (ExitPlanMode), edit, execute", kinds)
	}
	if o := step.Permissions[0]["option_id"]; o != "exit-plan-default" {
		t.Errorf("ExitPlanMode answered with %v, want exit-plan-default", o)
	}
	modes := claudeModes(es)
	t.Logf("mode updates: %v", modes)
	for _, m := range modes {
		if m == "auto" || m == "bypassPermissions" || m == "acceptEdits" {
			t.Errorf("the session went to mode %s", m)
		}
	}
	if len(modes) == 0 || modes[len(modes)-1] != "default" {
		t.Errorf("mode updates %v; want the last to be default (ExitPlanMode's exit)", modes)
	}
	claudeNoneUnasked(t, step, es)
}

// allow_always on a Write cannot make later calls run unasked: the
// preset's ask rule leaves the Write request no "allow all edits during
// this session" option (which would switch Claude Code to acceptEdits
// without telling the client), so a later command and write still ask.
func TestClaudeAllowAlwaysOnAWriteKeepsItAsking(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	script := modelserver.Script{
		{Say: "Writing.", Write: &modelserver.Write{Path: "a.txt", Content: "a\n"}},
		{Say: "Cleaning.", Shell: "rm -rf build"},
		{Say: "Writing again.", Write: &modelserver.Write{Path: "b.txt", Content: "b\n"}},
		{Say: "FINAL done"},
	}
	policy := `permission:
  rules:
    - if: 'any(commands(tool.command), # startsWith "rm ")'
      then: reject
    - if: tool.kind == "edit" && all(tool.locations, .in_workspace)
      then: allow_always
  default: reject`
	step, es, r, _ := s.turn(needTurnAgent(t, "claude"), script, "Run the script.", policy, "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
	claudeFileIs(t, filepath.Join(s.dir, "a.txt"), "a\n")
	claudeFileIs(t, filepath.Join(s.dir, "b.txt"), "b\n")
	claudeFileIs(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	if kinds := claudePermissions(t, step); strings.Join(kinds, ",") != "edit,execute,edit" {
		t.Fatalf("permission requests for %v, want edit, execute, edit: each call asked", kinds)
	}
	if p := step.Permissions[1]; p["decision"] != "reject" || p["command"] != "rm -rf build" {
		t.Errorf("the rm record %v; want it rejected", p)
	}
	for _, i := range []int{0, 2} {
		if o := step.Permissions[i]["option_id"]; o != "allow-once" {
			t.Errorf("write %d answered with %v, want allow-once (the only allow offered)", i, o)
		}
	}
	for _, m := range claudeModes(es) {
		if m != "default" {
			t.Errorf("the session went to mode %s", m)
		}
	}
	claudeNoneUnasked(t, step, es)
}
