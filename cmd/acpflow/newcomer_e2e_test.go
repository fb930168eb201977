package main

// The newcomer's cuts (issue 35), through the binary, as someone who
// comes from GitHub Actions meets them: an unset ${{ env.X }}, a colon in
// a plain run:, GitHub Actions' key names, functions and a mistyped flag,
// and the advice of acpflow prompt.

import (
	"encoding/json"
	"fmt"
	"os"
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
    if: env.CUT_IF != "x" && env.CUT_NIL == nil
    with: {agent: a, prompt: "hi ${{ env.CUT_PROMPT }}"}
  - id: cl
    if: false
    uses: acp-subagent
    with: {agent: claude, prompt: hi}
outputs:
  out: "[${{ env.CUT_OUTPUT }}]"
`, testAgent, agentArgs("-record", record)))
	set := map[string]string{"CUT_SET": "s", "CUT_EMPTY": "", "HOME": dir}
	unset := []string{"CUT_AGENT", "CUT_CLAUDE_KEY", "CUT_RUN", "CUT_SHELL_ENV", "CUT_DEFAULT", "CUT_IF", "CUT_NIL", "CUT_PROMPT", "CUT_OUTPUT"}
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
		// In if:, an unset variable is nil, not "": said so.
		if want := `wf.yaml:21:9: warning: env.CUT_IF is read here, and CUT_IF is not set in acpflow's environment (an expression sees nil, which == "" is not): export it before the run, or test env.CUT_IF == nil, or give a default: env.CUT_IF ?? ""`; !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", what, want, stderr)
		}
		for _, name := range []string{"CUT_SET", "CUT_EMPTY", "CUT_DEFAULT", "CUT_NIL"} {
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

// fakeNpx puts on PATH an npx that starts the test agent with args,
// whatever package a preset asks npx for, and returns the PATH.
func fakeNpx(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' %s\n", testAgent, strings.Join(quoted, " "))
	if err := os.WriteFile(filepath.Join(bin, "npx"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// Covers: an agent that answers "Authentication required (code -32000)"
// (at session/prompt, as claude-agent-acp does without a key, or at
// session/new) gets a hint naming the preset's key: in shell terms for
// acpflow prompt, where the user wrote no YAML (an export, --auth), in
// the workflow file's for run (a key under env:, auth:); an agent of no
// preset gets one too. Root's IS_SANDBOX is advised as an export for
// prompt.
func TestAnAgentWithoutCredentialsGetsAHintInTheTermsTheUserWrote(t *testing.T) {
	yaml := []string{"env:", "${{", "IS_SANDBOX: "}
	for _, tc := range []struct {
		name  string
		agent []string // the test agent's flags
		args  func(dir string) []string
		want  []string
		not   []string
	}{
		{"prompt claude, refused at the prompt", []string{"-prompt-auth-required", "-modes", "default"},
			func(string) []string { return []string{"prompt", "claude", "hi", "--permission", "reject"} },
			[]string{"Authentication required (code -32000)", "likely cause: it has no credentials: export ANTHROPIC_API_KEY=… before the run, or log in with `claude /login`"}, yaml},
		{"prompt codex, refused at the prompt", []string{"-prompt-auth-required", "-modes", "read-only"},
			func(string) []string { return []string{"prompt", "codex", "hi", "--permission", "reject"} },
			[]string{"likely cause: it has no credentials: export CODEX_API_KEY=… and add --auth api-key"}, yaml},
		{"prompt claude, refused at session/new", []string{"-require-auth", "key"},
			func(string) []string { return []string{"prompt", "claude", "hi", "--permission", "reject"} },
			[]string{"likely cause: it has no credentials: export ANTHROPIC_API_KEY=…"}, yaml},
		{"prompt claude as root without IS_SANDBOX", []string{"-stderr", "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n", "-crash-on", "session/new"},
			func(string) []string { return []string{"prompt", "claude", "hi", "--permission", "reject"} },
			[]string{"likely cause: Claude Code refuses to run as root: export IS_SANDBOX=1"}, yaml},
		{"run of a claude agent, refused at the prompt", []string{"-prompt-auth-required", "-modes", "default"},
			func(dir string) []string {
				return []string{"run", writeWorkflow(t, dir, "name: r\nagents:\n  c: {preset: claude}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: c, prompt: hi}}\n")}
			},
			[]string{"likely cause: it has no credentials: set ANTHROPIC_API_KEY and pass it in the agent's env: (ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }})"}, []string{"export "}},
		{"run of an agent of no preset, refused at the prompt", nil,
			func(dir string) []string {
				return []string{"run", writeWorkflow(t, dir, fmt.Sprintf("name: r\nagents:\n  c: {command: npx}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: c, prompt: hi}}\n"))}
			},
			[]string{"likely cause: it has no credentials: set auth: to one of its methods (acpflow probe lists them)"}, []string{"export "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			flags := append([]string{"-record", record}, tc.agent...)
			if tc.agent == nil {
				flags = append(flags, "-prompt-auth-required")
			}
			path := fakeNpx(t, dir, flags...)
			args := tc.args(dir)
			r := acpflowEnv(t, dir, map[string]string{"PATH": path, "HOME": dir, "ACPFLOW_STATE": filepath.Join(dir, "state.db")},
				[]string{"ANTHROPIC_API_KEY", "CODEX_API_KEY", "OPENAI_API_KEY", "IS_SANDBOX"}, args...)
			all := r.stdout + r.stderr
			if r.code != 1 {
				t.Errorf("exit %d, want 1\n%s", r.code, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("lacks %q:\n%s", w, all)
				}
			}
			if args[0] == "prompt" && strings.Contains(all, "warning:") {
				// The warnings of the file prompt wrote speak of its keys.
				t.Errorf("prompt printed a file's warning:\n%s", all)
			}
			_, hint, _ := strings.Cut(all, "likely cause:")
			hint, _, _ = strings.Cut(hint, "\n")
			for _, n := range tc.not {
				if strings.Contains(hint, n) {
					t.Errorf("the hint %q has %q", hint, n)
				}
			}
			assertAgentsGone(t, record)
		})
	}
}

// Covers: ": " inside an unquoted run:, prompt: or other value is told as
// such, at the colon's line:col, with the fix (quote it, or use `key: |`),
// by validate and by run (exit 2, nothing started); not in YAML's words.
func TestAColonInAnUnquotedValueSaysToQuoteIt(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, at, fix string }{
		{"a shell command", "name: t\nsteps:\n  - id: a\n    uses: shell\n    with:\n      run: echo \"compiling\"; echo \"main.go:12: oops\"\n",
			"6:46", `quote the command (run: 'echo "compiling"; echo "main.go:12: oops"'), or use run: |`},
		{"run: beside the step", "name: t\nsteps:\n  - id: a\n    run: grep -n TODO: src/\n",
			"4:22", "quote the command (run: 'grep -n TODO: src/'), or use run: |"},
		{"a prompt quoting an error", "name: t\nagents:\n  d: {builtin: demo}\nsteps:\n  - id: a\n    uses: acp-subagent\n    with:\n      agent: d\n      prompt: Fix main.go:12: undefined x\n",
			"9:29", "quote the text (prompt: 'Fix main.go:12: undefined x'), or use prompt: |"},
		{"a command continued on the next line", "name: t\nsteps:\n  - id: a\n    run: go vet ./... &&\n      echo \"vet: ok\"\n",
			"5:16", "quote the command, or use run: |"},
		{"an output", "name: t\nsteps:\n  - {id: a, run: echo hi}\noutputs:\n  o: it says: ${{ steps.a.output }}\n",
			"5:13", "quote the value (o: 'it says: ${{ steps.a.output }}'), or use o: |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf := writeWorkflow(t, dir, tc.body)
			for _, cmd := range []string{"validate", "run"} {
				r := acpflow(t, dir, cmd, wf)
				if r.code != 2 || !strings.Contains(r.stderr, "wf.yaml:"+tc.at+": \": \" in the ") || !strings.Contains(r.stderr, tc.fix) {
					t.Errorf("%s: exit %d, want 2 with %s and %q\n%s%s", cmd, r.code, tc.at, tc.fix, r.stdout, r.stderr)
				}
				if strings.Contains(r.stderr, "mapping value is not allowed") || strings.Contains(r.stdout, "started") {
					t.Errorf("%s: YAML's words, or a step started:\n%s%s", cmd, r.stdout, r.stderr)
				}
			}
		})
	}
}

// Covers: GitHub Actions' key names get acpflow's (working-directory →
// cwd at the step and under with:, timeout-minutes → timeout, strategy →
// for-each) or what to do instead (runs-on, on, a workflow's env:); its
// functions and contexts (failure(), success(), always(), cancelled(),
// secrets, github) get acpflow's way; validate and run alike, exit 2.
func TestGitHubActionsHabitsGetAcpflowsWay(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"working-directory on a step", "name: t\nsteps:\n  - id: a\n    run: make\n    working-directory: sub\n",
			`wf.yaml:5:5: step "a": unknown key "working-directory"; did you mean "cwd"?`},
		{"working_directory under with:", "name: t\nsteps:\n  - id: a\n    uses: shell\n    with: {run: make, working_directory: sub}\n",
			`wf.yaml:5:23: step "a": with: unknown key "working_directory" for shell; did you mean "cwd"?`},
		{"working-directory under an acp-subagent's with:", "name: t\nagents:\n  d: {builtin: demo}\nsteps:\n  - id: a\n    uses: acp-subagent\n    with: {agent: d, prompt: hi, working-directory: sub}\n",
			`did you mean "cwd"?`},
		{"timeout-minutes", "name: t\nsteps:\n  - id: a\n    run: make\n    timeout-minutes: 5\n",
			`unknown key "timeout-minutes"; did you mean "timeout"? (a duration: timeout: 10m)`},
		{"strategy", "name: t\nsteps:\n  - id: a\n    run: make\n    strategy: {matrix: {os: [a]}}\n",
			`unknown key "strategy"; did you mean "for-each"?`},
		{"runs-on", "name: t\nsteps:\n  - id: a\n    runs-on: ubuntu-latest\n    run: make\n",
			`wf.yaml:4:5: step "a": unknown key "runs-on"; acpflow has no runs-on: every step runs on this machine`},
		{"on", "name: t\non: push\nsteps:\n  - {id: a, run: make}\n",
			`wf.yaml:2:1: unknown key "on"; acpflow has no triggers (on:)`},
		{"a workflow's env", "name: t\nenv: {A: b}\nsteps:\n  - {id: a, run: make}\n",
			`wf.yaml:2:1: unknown key "env"; variables are set per step (a shell step's env:, an agent step's with.env:) or per agent (agents.NAME.env:)`},
		{"if: ${{ failure() }}", "name: t\nsteps:\n  - {id: a, run: make}\n  - id: b\n    needs: [a]\n    if: ${{ failure() }}\n    run: echo failed\n",
			`wf.yaml:6:13: step "b": if: expression does not compile: unknown name failure: acpflow has no failure(): a step runs after a failed one only when that one has continue-on-error: true; then test it with steps.ID.status == "failed"`},
		{"if: success()", "name: t\nsteps:\n  - {id: a, run: make}\n  - {id: b, needs: [a], if: success(), run: echo ok}\n",
			`unknown name success: acpflow has no success(): a step runs only when the steps it needs succeeded`},
		{"if: always()", "name: t\nsteps:\n  - {id: a, run: make}\n  - {id: b, needs: [a], if: always(), run: echo ok}\n",
			`unknown name always: acpflow has no always(): to run a step whatever the steps it needs did, give those continue-on-error: true`},
		{"if: cancelled()", "name: t\nsteps:\n  - {id: a, run: make}\n  - {id: b, needs: [a], if: cancelled(), run: echo ok}\n",
			`unknown name cancelled: acpflow has no cancelled()`},
		{"secrets.TOKEN", "name: t\nsteps:\n  - {id: a, run: 'echo ${{ secrets.TOKEN }}'}\n",
			`unknown name secrets: acpflow has no secrets context: read a secret from acpflow's environment, env.NAME`},
		{"github.sha", "name: t\nsteps:\n  - {id: a, run: 'echo ${{ github.sha }}'}\n",
			`unknown name github: acpflow has no github context: run.id, run.workspace and workflow.name are what it has`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf := writeWorkflow(t, dir, tc.body)
			for _, cmd := range []string{"validate", "run"} {
				r := acpflow(t, dir, cmd, wf)
				if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout, "started") {
					t.Errorf("%s: exit %d, want 2 with %q\n%s%s", cmd, r.code, tc.want, r.stdout, r.stderr)
				}
			}
		})
	}
}

// Covers: a mistyped long flag gets the closest flag of its command (its
// own, run's shared ones under prompt, and inherited), exit 2; one close
// to none says where the flags are listed.
func TestAMistypedFlagGetsTheClosestFlagOfItsCommand(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: t\nsteps:\n  - {id: a, run: echo hi}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", wf, "--inptu", "x=1"}, "unknown flag: --inptu; did you mean --input?"},
		{[]string{"run", wf, "--inptu=x=1"}, "unknown flag: --inptu; did you mean --input?"},
		{[]string{"run", wf, "--workspcae", dir}, "unknown flag: --workspcae; did you mean --workspace?"},
		{[]string{"run", wf, "--jsno"}, "unknown flag: --jsno; did you mean --json?"},
		{[]string{"validate", wf, "--polcy", "p.yaml"}, "unknown flag: --polcy; did you mean --policy?"},
		{[]string{"prompt", "demo", "hi", "--permision", "allow"}, "unknown flag: --permision; did you mean --permission?"},
		{[]string{"prompt", "demo", "hi", "--timout", "5s"}, "unknown flag: --timout; did you mean --timeout?"},
		{[]string{"runs", "--staus", "failed"}, "unknown flag: --staus; did you mean --status?"},
		{[]string{"agents", "--wdie"}, "unknown flag: --wdie; did you mean --wide?"},
		{[]string{"run", wf, "--no-such-flag"}, "unknown flag: --no-such-flag (acpflow run --help lists its flags)"},
	} {
		r := acpflow(t, dir, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "started") {
			t.Errorf("%v: exit %d, want 2 with %q\n%s%s", tc.args, r.code, tc.want, r.stdout, r.stderr)
		}
	}
}
