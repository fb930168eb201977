package main

// The newcomer's cuts (issue 35), through the binary, as someone who
// comes from GitHub Actions meets them: an unset ${{ env.X }}, a colon in
// a plain run:, GitHub Actions' key names, functions and a mistyped flag,
// and the advice of acpflow prompt.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Covers: an env.X that is not set renders as "" (not "null") in a shell
// step's run: and env:, an agent's env:, a prompt and outputs; validate
// and run warn of each such name on stderr at its first reference, exit 0;
// not for a name that is set, set empty, tested by the expression itself,
// nor twice for a preset's key.
func TestAnUnsetEnvVariableRendersEmptyAndIsWarnedOfForEveryStepKind(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: unset
agents:
  a:
    command: %s
    args: %s
    env:
      AGENT_KEY: ${{ env.CUT_AGENT }}
  claude:
    preset: claude
    env: {ANTHROPIC_API_KEY: "${{ env.CUT_CLAUDE_KEY }}", IS_SANDBOX: "1"}
steps:
  - id: sh
    uses: shell
    with:
      run: echo "[${{ env.CUT_RUN }}]" "[$FROM_ENV]" "[${{ env.CUT_SET }}]" "[${{ env.CUT_EMPTY }}]"
      env: {FROM_ENV: "${{ env.CUT_SHELL_ENV }}"}
  - id: short
    run: echo "<${{ env.CUT_RUN }}>" "<${{ env.CUT_DEFAULT ?? 'd' }}>"
  - id: ag
    uses: acp-subagent
    if: env.CUT_IF != "x"
    with: {agent: a, prompt: "hi ${{ env.CUT_PROMPT }}"}
  - id: cl
    if: false
    uses: acp-subagent
    with: {agent: claude, prompt: hi}
outputs:
  out: "[${{ env.CUT_OUTPUT }}]"
`, testAgent, agentArgs("-record", record)))
	set := map[string]string{"CUT_SET": "s", "CUT_EMPTY": "", "HOME": dir}
	unset := []string{"CUT_AGENT", "CUT_CLAUDE_KEY", "CUT_RUN", "CUT_SHELL_ENV", "CUT_DEFAULT", "CUT_IF", "CUT_PROMPT", "CUT_OUTPUT"}
	warned := map[string]string{ // name → where its first reference is
		"CUT_AGENT": "wf.yaml:7:22", "CUT_RUN": "wf.yaml:15:23", "CUT_SHELL_ENV": "wf.yaml:16:28",
		"CUT_PROMPT": "wf.yaml:22:38", "CUT_OUTPUT": "wf.yaml:28:14",
	}
	checkWarnings := func(what, stderr string) {
		t.Helper()
		for name, at := range warned {
			want := fmt.Sprintf(`%s: warning: env.%s is read here, and %s is not set in acpflow's environment (it renders as ""): export it before the run`, at, name, name)
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", what, want, stderr)
			}
		}
		for _, name := range []string{"CUT_SET", "CUT_EMPTY", "CUT_DEFAULT", "CUT_IF"} {
			if strings.Contains(stderr, "env."+name+" is read here") {
				t.Errorf("%s: warned of %s:\n%s", what, name, stderr)
			}
		}
		// The preset's warning names its key; no second one.
		if strings.Contains(stderr, "env.CUT_CLAUDE_KEY is read here") || !strings.Contains(stderr, "CUT_CLAUDE_KEY is not set in acpflow's environment: export it before the run") {
			t.Errorf("%s: the preset's key, once:\n%s", what, stderr)
		}
		if strings.Count(stderr, "env.CUT_RUN is read here") != 1 || !strings.Contains(stderr, "(read in 1 more place)") {
			t.Errorf("%s: CUT_RUN, once with its count:\n%s", what, stderr)
		}
	}

	r := acpflowEnv(t, dir, set, unset, "validate", wf)
	if r.code != 0 || !strings.Contains(r.stdout, "wf.yaml: ok") {
		t.Fatalf("validate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkWarnings("validate", r.stderr)

	out := filepath.Join(dir, "out.json")
	r = acpflowEnv(t, dir, set, unset, "run", wf, "--output", out)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkWarnings("run", r.stderr)
	var res struct {
		Outputs map[string]any
		Steps   map[string]struct{ Output string }
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Steps["sh"].Output; got != "[] [] [s] []\n" {
		t.Errorf("shell step's output %q, want %q", got, "[] [] [s] []\n")
	}
	if got := res.Steps["short"].Output; got != "<> <d>\n" {
		t.Errorf("run: shorthand's output %q", got)
	}
	if res.Outputs["out"] != "[]" {
		t.Errorf("outputs.out %q, want %q", res.Outputs["out"], "[]")
	}
	if strings.Contains(readFile(t, out), "null]") || strings.Contains(readFile(t, out), "<null>") {
		t.Errorf("a null rendered in the result:\n%s", readFile(t, out))
	}
	started := false
	for _, e := range readRecords(t, record) {
		if e["event"] != "start" {
			continue
		}
		started = true
		env, _ := e["env"].(map[string]any)
		if v, ok := env["AGENT_KEY"]; ok && v != "" {
			t.Errorf("the agent got AGENT_KEY=%q, want it empty", v)
		}
	}
	if !started {
		t.Error("the agent step did not run")
	}
	assertAgentsGone(t, record)
}
