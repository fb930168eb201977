package main

// End to end: the mode guard without words (issue 40). An agent with no
// preset and no mode: is kept in the mode it started in; a mode or a
// permission config option it changes on its own is set back, whatever
// the words of the mode; Copilot-style URL mode ids, an allow_all option
// and COPILOT_ALLOW_ALL in the environment are caught.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// Copilot's mode ids, as its session/new offers them.
const (
	urlAgent     = "https://agentclientprotocol.com/protocol/session-modes#agent"
	urlPlan      = "https://agentclientprotocol.com/protocol/session-modes#plan"
	urlAutopilot = "https://agentclientprotocol.com/protocol/session-modes#autopilot"
)

// The class is "any switch the client did not ask for, under any policy
// but allow, whatever the mode's id or words say".
func TestTheModeGuardSetsBackEverySwitchItDidNotAskFor(t *testing.T) {
	t.Run("a switch to a mode whose words say nothing is set back to the starting mode", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-modes", urlAgent+","+urlPlan, "-switch-mode", urlPlan)
		if a.r.code != 0 || a.step["status"] != "succeeded" {
			t.Fatalf("exit %d, step %v: %v\n%s", a.r.code, a.step["status"], a.step["error"], a.r.stderr)
		}
		sets := agentrecord.Named(a.record, "set_mode")
		if len(sets) != 1 || !strings.Contains(fmt.Sprint(sets[0]["params"]), urlAgent) {
			t.Errorf("set_mode %v; want one, back to %s", sets, urlAgent)
		}
		if ev := a.eventsOf("step_update", "mode_restored"); len(ev) != 1 || ev[0]["from"] != urlPlan || ev[0]["to"] != urlAgent {
			t.Errorf("mode_restored events %v", ev)
		}
	})
	t.Run("a start in a mode whose id fragment says autopilot fails with no mode to go back to", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-modes", urlAutopilot+","+urlAgent)
		if a.r.code != 1 || !strings.Contains(fmt.Sprint(a.step["error"]), "#autopilot") {
			t.Fatalf("exit %d, error %v", a.r.code, a.step["error"])
		}
		if n := countRecorded(t, a.record, "prompt"); n != 0 {
			t.Errorf("the agent was prompted %d times in autopilot", n)
		}
	})
	t.Run("a start in autopilot is set back to mode: before the prompt", func(t *testing.T) {
		a := runAlone(t, "mode: \""+urlAgent+"\"", "permission: reject", "-modes", urlAutopilot+","+urlAgent)
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		if n := countRecorded(t, a.record, "set_mode"); n != 1 {
			t.Errorf("%d session/set_mode, want 1", n)
		}
	})
	t.Run("under allow a switch stays", func(t *testing.T) {
		a := runAlone(t, "", "permission: allow", "-modes", urlAgent+","+urlAutopilot, "-switch-mode", urlAutopilot, "-prompt-delay", "10ms")
		if a.r.code != 0 || countRecorded(t, a.record, "set_mode") != 0 {
			t.Fatalf("exit %d, %d set_mode", a.r.code, countRecorded(t, a.record, "set_mode"))
		}
	})
}

// The class is "a config option of a permission category, or named for
// approving everything, that starts on or is turned on by the agent".
func TestAPermissionOptionTheAgentTurnsOnIsSetBack(t *testing.T) {
	const allowAll = "allow_all:permissions=off|on"
	t.Run("turned on mid-turn, it is set back to off", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-config-option", allowAll, "-switch-option", "allow_all=on")
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		sets := agentrecord.Named(a.record, "set_config_option")
		if len(sets) != 1 || !strings.Contains(fmt.Sprint(sets[0]["params"]), "value:off") {
			t.Errorf("set_config_option %v; want one, to off", sets)
		}
		if ev := a.eventsOf("step_update", "mode_restored"); len(ev) != 1 || ev[0]["option"] != "allow_all" || ev[0]["from"] != "on" || ev[0]["to"] != "off" {
			t.Errorf("mode_restored events %v", ev)
		}
	})
	t.Run("on at the start, it is turned off before the prompt", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-config-option", "allow_all:permissions=on|off")
		if a.r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
		}
		sets := agentrecord.Named(a.record, "set_config_option")
		if len(sets) != 1 || !strings.Contains(fmt.Sprint(sets[0]["params"]), "value:off") {
			t.Errorf("set_config_option %v; want one, to off", sets)
		}
	})
	t.Run("an option that is no permission's is left alone", func(t *testing.T) {
		a := runAlone(t, "", "permission: reject", "-config-option", "model=small|large", "-switch-option", "model=large")
		if a.r.code != 0 || countRecorded(t, a.record, "set_config_option") != 0 {
			t.Fatalf("exit %d, %d set_config_option", a.r.code, countRecorded(t, a.record, "set_config_option"))
		}
	})
}

// The class is "a variable that makes the agent approve everything
// itself, by the preset's list or its name": dropped under any policy but
// allow, with a warning.
func TestAVariableThatApprovesEverythingIsDropped(t *testing.T) {
	env := "env: {COPILOT_ALLOW_ALL: \"true\", KEEP_ME: \"1\"}"
	for _, tt := range []struct {
		policy string
		kept   bool
	}{{"permission: reject", false}, {"permission: allow", true}} {
		t.Run(tt.policy, func(t *testing.T) {
			a := runAlone(t, env, tt.policy)
			if a.r.code != 0 {
				t.Fatalf("exit %d: %v\n%s", a.r.code, a.step["error"], a.r.stderr)
			}
			start := agentrecord.Named(a.record, "start")
			if len(start) != 1 {
				t.Fatalf("start events %v", start)
			}
			got, _ := start[0]["env"].(map[string]any)
			if _, has := got["COPILOT_ALLOW_ALL"]; has != tt.kept || got["KEEP_ME"] != "1" {
				t.Errorf("the agent's env has COPILOT_ALLOW_ALL %v, KEEP_ME %q; want %v and 1", has, got["KEEP_ME"], tt.kept)
			}
			warned := strings.Contains(fmt.Sprint(a.eventsOf("step_update", "warning")), "COPILOT_ALLOW_ALL was dropped")
			if warned == tt.kept {
				t.Errorf("warned %v: %v", warned, a.eventsOf("step_update", "warning"))
			}
		})
	}
}

// validate refuses a mode or a config value that decides alone, named in
// the file, by its id fragment or its name, for an agent without a preset.
func TestValidateRefusesAWideningModeOrOptionByItsWords(t *testing.T) {
	for _, tt := range []struct{ name, keys, want string }{
		{"a URL mode id ending in autopilot", "mode: \"" + urlAutopilot + "\"", "#autopilot\" lets agent \"a\""},
		{"allow_all turned on", "config: {allow_all: \"on\"}", "config allow_all: \"on\" lets agent \"a\""},
		{"the mode option set to autopilot", "config: {mode: \"" + urlAutopilot + "\"}", "config mode:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			wf := writeWorkflow(t, dir, "name: m\nagents:\n  a: {command: copilot, "+tt.keys+"}\npolicies: {permission: reject}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n")
			r := acpflow(t, dir, "validate", wf)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, want 2 and %q\n%s", r.code, tt.want, r.stderr)
			}
		})
	}
	t.Run("off is valid", func(t *testing.T) {
		dir := t.TempDir()
		wf := writeWorkflow(t, dir, "name: m\nagents:\n  a: {command: copilot, config: {allow_all: \"off\"}}\npolicies: {permission: reject}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n")
		if r := acpflow(t, dir, "validate", wf); r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
	})
}

// The wording of an unasked call and of `prompt -- COMMAND`: the article
// agrees with the kind, and the agent is named after its command.
func TestAnUnaskedCallUnderPromptNamesTheAgentAfterItsCommand(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "agent.jsonl")
	r := acpflow(t, dir, "prompt", "--permission", "reject", "--state", filepath.Join(dir, "state.db"), "--", testAgent, "-unasked", "execute:rm -rf build", "-record", rec, "go")
	assertAgentsGone(t, rec)
	if r.code != 1 || !strings.Contains(r.stderr, "agent testagent ran an execute call without asking") {
		t.Fatalf("exit %d, want 1 and the agent named testagent with \"an execute\"\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "agent agent") {
		t.Errorf("the agent is still called agent:\n%s", r.stderr)
	}
	for cmd, want := range map[string]string{"npx -y @github/copilot@1.0.102 --acp": "copilot", "/usr/bin/codex-acp": "codex-acp", "node ./agent.js": "agent", "./9lives": "agent"} {
		if got := commandAgentName(strings.Fields(cmd)); got != want {
			t.Errorf("commandAgentName(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// The class is "an execute, edit, delete or move call that started
// without a request and ended failed" (codex-acp's commands in its own
// read-only sandbox): recorded with its status, never failing the step;
// one that completed still does.
func TestAnUnaskedCallThatFailedIsRecordedButDoesNotFailTheStep(t *testing.T) {
	a := runAlone(t, "", "permission: reject", "-unasked-failed", "execute:echo hi > out.txt")
	if a.r.code != 0 || a.step["status"] != "succeeded" {
		t.Fatalf("exit %d, step %v: %v\n%s", a.r.code, a.step["status"], a.step["error"], a.r.stderr)
	}
	if p := a.permissions(); len(p) != 1 || p[0]["decision"] != "unasked" || p[0]["would"] != "reject" || p[0]["status"] != "failed" || p[0]["command"] != "echo hi > out.txt" {
		t.Errorf("permissions %v; want one unasked record, would reject, status failed", p)
	}
	// The store keeps the status: show says the call failed.
	dir := filepath.Dir(a.record)
	show := acpflow(t, dir, "show", "--state", filepath.Join(dir, "state.db"), lastRunID(t, a))
	if !strings.Contains(show.stdout, `unasked execute "echo hi > out.txt": ran without asking and failed; the policy would reject`) {
		t.Errorf("show does not say the unasked call failed:\n%s%s", show.stdout, show.stderr)
	}
	a = runAlone(t, "", "permission: reject", "-unasked", "delete:build")
	if a.r.code != 1 {
		t.Fatalf("a completed unasked delete: exit %d, want 1", a.r.code)
	}
	if p := a.permissions(); len(p) != 1 || p[0]["status"] != "completed" {
		t.Errorf("permissions %v; want status completed", p)
	}
}

// lastRunID is the run id of a's run_start event.
func lastRunID(t *testing.T, a aloneRun) string {
	t.Helper()
	for _, e := range a.events {
		if e["type"] == "run_start" {
			return fmt.Sprint(e["run_id"])
		}
	}
	t.Fatal("no run_start event")
	return ""
}
