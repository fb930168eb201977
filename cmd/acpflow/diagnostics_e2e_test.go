package main

// Real-agent diagnostics (issue 26), through the binary: what validate and
// run say when a preset's agent would lack its key, its program, or its
// credentials, and when it dies or stalls while it starts.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
)

// acpflowEnv runs the binary as acpflow does, with the variables of set
// set and those of unset removed from the test's environment.
func acpflowEnv(t *testing.T, dir string, set map[string]string, unset []string, args ...string) result {
	t.Helper()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := set[name]; over || contains(unset, name) {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(acpflowBin, args...)
	cmd.Dir, cmd.Env = dir, append(env, "NO_COLOR=1")
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
	return result{code, out.String(), errb.String()}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const diagSecret = "sk-ant-diagnostics-e2e-0123456789"

func TestValidateWarnsWhenAPresetsKeyWouldNotReachItsAgent(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	passed := `name: claude-review
agents:
  claude:
    preset: claude
    env:
      ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }}
      IS_SANDBOX: "1"
steps:
  - {id: review, uses: acp-subagent, with: {agent: claude, prompt: hi}}
`
	wf := writeWorkflow(t, dir, passed)

	// Passed as ${{ env.… }} but not set: warned at the agent's preset:,
	// exit 0, and the file is still ok.
	r := acpflowEnv(t, dir, map[string]string{"HOME": home}, []string{"ANTHROPIC_API_KEY"}, "validate", wf)
	if r.code != 0 || !strings.Contains(r.stdout, "wf.yaml: ok") {
		t.Fatalf("exit %d, want 0 with the file ok\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := `wf.yaml:4:13: warning: agent "claude" (preset claude) needs ANTHROPIC_API_KEY or a login with ` + "`claude /login`" +
		`, which would not reach it: agents.claude.env.ANTHROPIC_API_KEY is ${{ env.ANTHROPIC_API_KEY }}, and ANTHROPIC_API_KEY is not set in acpflow's environment`
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks the warning %q:\n%s", want, r.stderr)
	}

	// Set and passed: nothing to say.
	r = acpflowEnv(t, dir, map[string]string{"HOME": home, "ANTHROPIC_API_KEY": diagSecret}, nil, "validate", wf)
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("with the key set and passed: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// Set, but not passed: the default env policy keeps credentials from
	// agents, and the warning says so, without the value.
	notPassed := strings.Replace(passed, "      ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }}\n", "", 1)
	wf = writeWorkflow(t, dir, notPassed)
	r = acpflowEnv(t, dir, map[string]string{"HOME": home, "ANTHROPIC_API_KEY": diagSecret}, nil, "validate", wf)
	if r.code != 0 || !strings.Contains(r.stderr, "ANTHROPIC_API_KEY is set in acpflow's environment, but the env policy does not pass it") ||
		!strings.Contains(r.stderr, "add ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }} under the agent's env:") {
		t.Errorf("not passed: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, diagSecret) {
		t.Errorf("the key's value was printed:\n%s\n%s", r.stdout, r.stderr)
	}

	// An env policy that passes it counts as passing it.
	wf = writeWorkflow(t, dir, strings.Replace(notPassed, "steps:", "policies:\n  env: {rules: [{if: 'name == \"ANTHROPIC_API_KEY\"', then: keep}]}\nsteps:", 1))
	if r := acpflowEnv(t, dir, map[string]string{"HOME": home, "ANTHROPIC_API_KEY": diagSecret}, nil, "validate", wf); r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("passed by the env policy: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// A login of Claude Code's own under the agent's HOME meets the need.
	wf = writeWorkflow(t, dir, passed)
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte("{}"), 0o600)
	if r := acpflowEnv(t, dir, map[string]string{"HOME": home}, []string{"ANTHROPIC_API_KEY"}, "validate", wf); r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("logged in: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestValidateWarnsAsRootWithoutIsSandboxForClaude(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the warning is for acpflow running as root")
	}
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: claude-root
agents:
  claude:
    preset: claude
    env: {ANTHROPIC_API_KEY: "${{ env.ANTHROPIC_API_KEY }}"}
steps:
  - {id: review, uses: acp-subagent, with: {agent: claude, prompt: hi}}
`)
	r := acpflowEnv(t, dir, map[string]string{"ANTHROPIC_API_KEY": diagSecret}, []string{"IS_SANDBOX"}, "validate", wf)
	want := `wf.yaml:4:13: warning: agent "claude" (preset claude): acpflow runs as root, and the agent refuses to start as root without IS_SANDBOX=1 in its env: add IS_SANDBOX: "1" under the agent's env:`
	if r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", r.code, want, r.stderr)
	}
	// IS_SANDBOX set in acpflow's environment reaches the agent through
	// the default env policy (it is no credential).
	if r := acpflowEnv(t, dir, map[string]string{"ANTHROPIC_API_KEY": diagSecret, "IS_SANDBOX": "1"}, nil, "validate", wf); strings.Contains(r.stderr, "IS_SANDBOX") {
		t.Errorf("IS_SANDBOX=1 inherited still warned:\n%s", r.stderr)
	}
}

func TestRunWarnsBeforeTheSpawnOfAnEnvValueThatRenderedEmpty(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: unset-key
agents:
  a:
    command: %s
    args: %s
    env:
      API_KEY: ${{ env.DIAG_UNSET_KEY }}
      OTHER_KEY: ${{ env.DIAG_SET_KEY }}
      EMPTY_KEY: ${{ env.DIAG_EMPTY_KEY }}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs("-record", record)))
	set := map[string]string{"DIAG_SET_KEY": diagSecret, "DIAG_EMPTY_KEY": ""}
	r := acpflowEnv(t, dir, set, []string{"DIAG_UNSET_KEY"}, "run", wf, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var warnings []string
	spawnedAt, warnedAt := -1, -1
	for i, line := range strings.Split(r.stdout, "\n") {
		switch {
		case strings.Contains(line, `"kind":"warning"`):
			warnings = append(warnings, line)
			if warnedAt < 0 {
				warnedAt = i
			}
		case strings.Contains(line, `"kind":"spawned"`) && spawnedAt < 0:
			spawnedAt = i
		}
	}
	if len(warnings) != 2 || warnedAt < 0 || spawnedAt < warnedAt {
		t.Fatalf("want two warnings before the spawn (warned at line %d, spawned at %d): %q\n%s", warnedAt, spawnedAt, warnings, r.stdout)
	}
	for _, want := range []string{
		`agents.a.env.API_KEY: ${{ env.DIAG_UNSET_KEY }} rendered empty (DIAG_UNSET_KEY is not set in acpflow's environment)`,
		`agents.a.env.EMPTY_KEY: ${{ env.DIAG_EMPTY_KEY }} rendered empty (DIAG_EMPTY_KEY is empty in acpflow's environment)`,
	} {
		if !strings.Contains(strings.Join(warnings, "\n"), want) {
			t.Errorf("no warning %s in %q", want, warnings)
		}
	}
	if strings.Contains(r.stdout+r.stderr, diagSecret) {
		t.Errorf("a value was printed")
	}

	// The line view says it too, on the step's line.
	r = acpflowEnv(t, dir, set, []string{"DIAG_UNSET_KEY"}, "run", wf)
	if r.code != 0 || !strings.Contains(r.stdout, `[s] warning: agents.a.env.API_KEY: ${{ env.DIAG_UNSET_KEY }} rendered empty`) {
		t.Errorf("line view: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)
}

func TestAPresetsMissingProgramNamesThePackageThatProvidesIt(t *testing.T) {
	dir, empty := t.TempDir(), t.TempDir()
	for _, tc := range []struct{ command, want string }{
		{"command: claude-agent-acp", `agent "claude": claude-agent-acp not found on PATH; install it with: npm install -g @agentclientprotocol/claude-agent-acp`},
		// The preset's own launcher.
		{"", `agent "claude": npx not found on PATH; it comes with Node.js and npm: install Node.js, or install the agent with: npm install -g @agentclientprotocol/claude-agent-acp (then set command: claude-agent-acp)`},
	} {
		wf := writeWorkflow(t, dir, fmt.Sprintf(`name: missing
agents:
  claude:
    preset: claude
    %s
steps:
  - {id: s, uses: acp-subagent, with: {agent: claude, prompt: hi}}
`, tc.command))
		out := filepath.Join(dir, "out.json")
		r := acpflowEnv(t, dir, map[string]string{"PATH": empty}, nil, "run", wf, "--output", out)
		// A missing program fails the step, as any agent that cannot
		// start does (docs/results.md#exit-codes): exit 1.
		inJSON, _ := json.Marshal(tc.want)
		if r.code != 1 || !strings.Contains(r.stdout, tc.want) || !strings.Contains(readFile(t, out), strings.Trim(string(inJSON), `"`)) {
			t.Errorf("%q: exit %d, want 1 with %q\n%s\n%s", tc.command, r.code, tc.want, r.stdout, r.stderr)
		}
	}
}

func TestAnAgentThatEndsDuringSessionNewGetsItsStderrAndTheLikelyCause(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: no-key
agents:
  claude:
    preset: claude
    command: %s
    args: %s
    env:
      ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }}
      IS_SANDBOX: "1"
steps:
  - {id: s, uses: acp-subagent, with: {agent: claude, prompt: hi}}
`, testAgent, agentArgs("-record", record, "-stderr", "Error: Query closed before response received\n", "-crash-on", "session/new")))
	out := filepath.Join(dir, "out.json")
	r := acpflowEnv(t, dir, map[string]string{"HOME": dir}, []string{"ANTHROPIC_API_KEY"}, "run", wf, "--output", out)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"agent claude exited (exit status 3) during session/new",
		"likely cause: the agent ended during session/new; it likely has no credentials: set ANTHROPIC_API_KEY and pass it in the agent's env:",
		"agent stderr (last lines):",
		"Error: Query closed before response received",
	} {
		if !strings.Contains(r.stdout, want) || !strings.Contains(readFile(t, out), want) {
			t.Errorf("the step's error lacks %q:\n%s\n%s", want, r.stdout, readFile(t, out))
		}
	}
	assertAgentsGone(t, record)
}

func TestAnAgentThatStallsInSessionNewReportsThePhaseAndItsStderr(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: stall
agents:
  claude:
    preset: claude
    command: %s
    args: %s
    start-timeout: 5s
    env: {ANTHROPIC_API_KEY: not-a-real-key, IS_SANDBOX: "1"}
steps:
  - {id: s, uses: acp-subagent, with: {agent: claude, prompt: hi}}
`, testAgent, agentArgs("-record", record, "-stderr", "loading Claude Code settings\n", "-hang-on", "session/new")))
	r := acpflowEnv(t, dir, map[string]string{"HOME": dir}, nil, "run", wf)
	for _, want := range []string{
		// 5 s, not 1: the start-timeout also bounds the spawn and
		// initialize, which a loaded machine may take a second or two for.
		"agent claude did not start within 5s (start-timeout): no answer to session/new",
		"agent stderr (last lines):\n      loading Claude Code settings",
	} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, want 1 and %q:\n%s\n%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "not-a-real-key") {
		t.Errorf("the key's value was printed:\n%s", r.stdout)
	}
	assertAgentsGone(t, record)
}

func TestAStepWithoutTimeoutGetsTheDocumentedDefault(t *testing.T) {
	// The default is the one docs/workflow.md states.
	doc := readFile(t, filepath.Join(repoRoot(t), "docs", "workflow.md"))
	def := strings.TrimSuffix(engine.DefaultStepTimeout.String(), "0s") // 30m0s → 30m
	if strings.HasSuffix(def, "h0m") {
		def = strings.TrimSuffix(def, "0m") // 1h0m0s → 1h
	}
	if !regexp.MustCompile("`timeout`.*default `" + regexp.QuoteMeta(def) + "`").MatchString(doc) {
		t.Errorf("docs/workflow.md does not state the step timeout's default %s", def)
	}
	// Applied: a step that hangs is ended by a short timeout of its own
	// (the default itself is the loader's, TestStepTimeoutDefaults); 0 is
	// valid and turns it off.
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: hang
agents:
  hang: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, timeout: 500ms, with: {agent: hang, prompt: hi}}
`, testAgent, agentArgs("-record", record, "-prompt-hang")))
	r := acpflow(t, dir, "run", wf)
	if r.code != 1 || !strings.Contains(r.stdout, "step timed out after 500ms") {
		t.Errorf("exit %d, want 1 and the step's timeout:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)
	off := writeWorkflow(t, dir, fmt.Sprintf(`name: hang
agents:
  hang: {command: %s}
steps:
  - {id: s, uses: acp-subagent, timeout: 0, with: {agent: hang, prompt: hi}}
`, testAgent))
	if r := acpflow(t, dir, "validate", off); r.code != 0 {
		t.Errorf("timeout: 0: exit %d\n%s", r.code, r.stderr)
	}
}
