package main

// End to end: sandbox: on shell steps and the paths every sandbox keeps
// from its process (issue 36, SPEC §10), through the binary: a shell
// step's own sandbox:, run --sandbox and an outer policy's `sandbox:
// required` confine its command; no sandbox reads acpflow's run store or
// state directory, nor the keys in the home of the user running acpflow
// when the agent has another HOME; a write: entry or cwd that leads
// through symlinks into a denied path is refused before anything runs.
// Each forbidden try is shown to work without the sandbox, and nothing is
// left running.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/sandbox"
)

func skipWithoutSandbox(t *testing.T) {
	t.Helper()
	if r := sandbox.Probe(); !r.FS || !r.UserNS || !r.PIDNS {
		t.Skipf("this kernel cannot enforce a sandbox: %+v", r)
	}
}

// shellStep is a step of a result, with what a shell sandbox adds.
type shellStep struct {
	shellR
	Sandbox *struct {
		Enforced bool     `json:"enforced"`
		Deny     []string `json:"deny"`
	} `json:"sandbox"`
}

// runConfined runs wf.yaml in dir (the workflow's body) on workspace ws
// with env over the test's (acpflowEnv), and returns the exit, stderr and the steps of
// its result.
func runConfined(t *testing.T, dir, ws, body string, env map[string]string, args ...string) (result, map[string]shellStep) {
	t.Helper()
	wf := writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.json")
	os.Remove(out)
	r := acpflowEnv(t, dir, env, nil, append([]string{"run", wf, "--workspace", ws, "--output", out}, args...)...)
	var res struct {
		Steps map[string]shellStep `json:"steps"`
	}
	if b, err := os.ReadFile(out); err == nil {
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("result JSON: %v\n%s", err, b)
		}
	}
	return r, res.Steps
}

// outcomes are the "WHAT: RESULT" lines a step printed.
func outcomes(s shellStep) map[string]string {
	out := map[string]string{}
	text, _ := s.Output.(string)
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			out[k] = v
		}
	}
	return out
}

// tryWrite is a shell line that tries to make file and says how it went,
// as "LABEL: ok" or "LABEL: denied".
func tryWrite(label, file string) string {
	return fmt.Sprintf(`if touch %s 2>/dev/null; then echo "%s: ok"; else echo "%s: denied"; fi`, file, label, label)
}

func tryRead(label, file string) string {
	return fmt.Sprintf(`if cat %s >/dev/null 2>&1; then echo "%s: read"; else echo "%s: denied"; fi`, file, label, label)
}

// A shell step with sandbox: true (on the step, as run: writes it, and
// under with:) writes in its cwd and nowhere else: a write to acpflow's
// HOME fails the command with a non-zero exit; what it left running in
// the background is gone with the run.
func TestASandboxedShellStepWritesOnlyInItsCwd(t *testing.T) {
	skipWithoutSandbox(t)
	dir, ws, home, outside := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	sleep := copySleep(t)
	mark := randomMark()
	body := fmt.Sprintf(`name: confined
steps:
  - id: short
    run: |
      "$SLEEP" 300 &
      echo in > inside.txt && echo "cwd: ok"
      %s
    env: {SLEEP: %q, OUTSIDE: %q, E2E_SHELL_MARK: %q}
    sandbox: true
  - id: home
    uses: shell
    with:
      run: touch "$HOME/escaped"
      sandbox: true
    continue-on-error: true
`, tryWrite("outside", `"$OUTSIDE/escaped"`), sleep, outside, mark)
	r, st := runConfined(t, dir, ws, body, map[string]string{"HOME": home})
	t.Logf("exit %d\n%s", r.code, r.stderr)
	got := outcomes(st["short"])
	if st["short"].Status != "succeeded" || got["cwd"] != "ok" || got["outside"] != "denied" {
		t.Errorf("step short: %s, %v; want succeeded, the cwd written and the outside denied\nerror: %s", st["short"].Status, got, st["short"].Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "inside.txt")); err != nil {
		t.Errorf("the write in the cwd did not happen: %v", err)
	}
	if h := st["home"]; h.Status != "failed" || h.ExitCode == nil || *h.ExitCode == 0 {
		t.Errorf("step home: %s, exit code %s; want a failure with a non-zero exit", h.Status, exitCodeOf(h.shellR))
	}
	for _, p := range []string{filepath.Join(outside, "escaped"), filepath.Join(home, "escaped")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written from inside the sandbox", p)
		}
	}
	for _, id := range []string{"short", "home"} {
		if sb := st[id].Sandbox; sb == nil || !sb.Enforced {
			t.Errorf("step %s: sandbox %+v, want enforced", id, sb)
		}
	}
	assertNoProcessFrom(t, filepath.Dir(sleep))
	assertNoProcessMarked(t, "E2E_SHELL_MARK="+mark)
}

// A shell step that sets no sandbox: runs confined under run --sandbox
// and under an outer policy file's `sandbox: required` (its own sandbox:
// false included), and unconfined otherwise: the write the sandbox
// refuses is one the command can do.
func TestRunSandboxAndAnOuterPolicyConfineShellSteps(t *testing.T) {
	skipWithoutSandbox(t)
	dir, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	policy := writeFile(t, t.TempDir(), "policy.yaml", "sandbox: required\n")
	step := func(sandbox string) string {
		return fmt.Sprintf("name: s\nsteps:\n  - id: s\n    run: |\n      echo in > inside.txt && echo \"cwd: ok\"\n      %s\n    env: {OUTSIDE: %q}\n%s",
			tryWrite("outside", `"$OUTSIDE/escaped-$RANDOM"`), outside, sandbox)
	}
	for _, tt := range []struct {
		name, sandbox string
		args          []string
		want          string // outside's outcome
		enforced      bool
	}{
		{"without either, the command writes anywhere", "", nil, "ok", false},
		{"run --sandbox", "", []string{"--sandbox"}, "denied", true},
		{"an outer policy file with sandbox: required", "", []string{"--policy", policy}, "denied", true},
		{"sandbox: false under the outer file still runs sandboxed", "    sandbox: false\n", []string{"--policy", policy}, "denied", true},
		{"the workflow's sandbox: is the step's default", "", nil, "denied", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := step(tt.sandbox)
			if strings.HasPrefix(tt.name, "the workflow's") {
				body = strings.Replace(body, "name: s\n", "name: s\nsandbox: true\n", 1)
			}
			r, st := runConfined(t, dir, ws, body, nil, tt.args...)
			got := outcomes(st["s"])
			if r.code != 0 || got["cwd"] != "ok" || got["outside"] != tt.want {
				t.Errorf("exit %d, %v; want 0, the cwd written and the outside %s\nstderr: %s", r.code, got, tt.want, r.stderr)
			}
			if sb := st["s"].Sandbox; (sb != nil && sb.Enforced) != tt.enforced {
				t.Errorf("sandbox %+v, want enforced %t", sb, tt.enforced)
			}
		})
	}
}

// No sandbox reads acpflow's run store (here given with --state) or what
// its state directory holds, which an unconfined step can: a step that
// cats the store fails.
func TestASandboxCannotReadAcpflowsRunStore(t *testing.T) {
	skipWithoutSandbox(t)
	dir, ws, xdg := t.TempDir(), t.TempDir(), t.TempDir()
	store := filepath.Join(t.TempDir(), "state.db")
	notes := writeFile(t, xdg, "acpflow/notes.txt", "acpflow's own\n")
	lines := tryRead("store", `"$STORE"`) + "\n      " + tryRead("state", `"$NOTES"`)
	body := fmt.Sprintf(`name: store
steps:
  - id: open
    run: |
      %s
    env: {STORE: %q, NOTES: %q}
  - id: boxed
    needs: [open]
    run: |
      %s
    env: {STORE: %q, NOTES: %q}
    sandbox: true
  - id: cat
    needs: [boxed]
    run: cat "$STORE"
    env: {STORE: %q}
    sandbox: true
    continue-on-error: true
`, lines, store, notes, lines, store, notes, store)
	r, st := runConfined(t, dir, ws, body, map[string]string{"XDG_STATE_HOME": xdg}, "--state", store)
	t.Logf("exit %d\n%s", r.code, r.stderr)
	if got := outcomes(st["open"]); got["store"] != "read" || got["state"] != "read" {
		t.Errorf("unconfined: %v; want both read (the test's own check)", got)
	}
	if got := outcomes(st["boxed"]); got["store"] != "denied" || got["state"] != "denied" {
		t.Errorf("sandboxed: %v; want both denied", got)
	}
	if c := st["cat"]; c.Status != "failed" || c.ExitCode == nil || *c.ExitCode == 0 {
		t.Errorf("cat of the store: %s, exit code %s; want a failure", c.Status, exitCodeOf(c.shellR))
	}
}

// A write: entry or a cwd that leads through symlinks (one link or a
// chain) into a denied path (~/.ssh of the HOME acpflow runs with) is
// refused by validate and run with exit 2, at the value in the file,
// naming the path and the denied entry, before anything starts; a cwd
// rendered at run time that does fails its step, saying the same.
func TestASandboxPathThroughASymlinkIntoADeniedPathIsRefused(t *testing.T) {
	skipWithoutSandbox(t)
	home, ws := t.TempDir(), t.TempDir()
	key := writeFile(t, home, ".ssh/id_rsa", plantedKey)
	ssh := filepath.Dir(key)
	if err := os.Symlink(ssh, filepath.Join(ws, "keys")); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(ws, "keys"), filepath.Join(ws, "deeper")) // deeper → keys → ~/.ssh
	env := map[string]string{"HOME": home}
	record := filepath.Join(t.TempDir(), "record.jsonl")
	for _, tt := range []struct{ name, body, at string }{
		{"a shell step's write:", "steps:\n  - id: s\n    run: cat keys/id_rsa\n    sandbox: {write: [keys]}\n", "wf.yaml:5:"},
		{"a chain of links under with:", "steps:\n  - id: s\n    uses: shell\n    with: {run: 'true', sandbox: {write: [deeper]}}\n", "wf.yaml:5:"},
		{"a static cwd under the workflow's sandbox", "sandbox: true\nsteps:\n  - id: s\n    run: 'true'\n    cwd: keys\n", "wf.yaml:6:"},
		{"an agent's write:", fmt.Sprintf("agents:\n  a: {command: %s, args: %s, sandbox: {write: [deeper]}}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: hi}\n",
			testAgent, agentArgs("-record", record)), "wf.yaml:7:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			wf := writeWorkflow(t, dir, "name: links\n"+tt.body)
			for _, cmd := range [][]string{{"validate", wf}, {"run", wf, "--workspace", ws}} {
				r := acpflowEnv(t, ws, env, nil, cmd...)
				if r.code != 2 || !strings.Contains(r.stderr, tt.at) || !strings.Contains(r.stderr, "inside the denied "+ssh) {
					t.Errorf("%s: exit %d\n%s\nwant 2, at %s, naming the denied %s", cmd[0], r.code, r.stderr, tt.at, ssh)
				}
			}
			if _, err := os.Stat(record); err == nil {
				t.Error("the agent was started")
			}
		})
	}
	t.Run("a cwd rendered at run time", func(t *testing.T) {
		body := "name: links\ninputs: {d: {type: string}}\nsteps:\n  - id: s\n    run: ls\n    cwd: ${{ inputs.d }}\n    sandbox: true\n"
		r, st := runConfined(t, t.TempDir(), ws, body, env, "--input", "d=deeper")
		s := st["s"]
		if r.code != 1 || s.Status != "failed" || !strings.Contains(s.Error, filepath.Join(ws, "deeper")) || !strings.Contains(s.Error, "inside the denied "+ssh) {
			t.Errorf("exit %d, step %s: %s\nwant 1 and a failed step naming %s and the denied %s", r.code, s.Status, s.Error, filepath.Join(ws, "deeper"), ssh)
		}
	})
	if b, _ := os.ReadFile(key); string(b) != plantedKey {
		t.Errorf("the key changed: %q", b)
	}
}

// An agent given another HOME still cannot read the keys in the home of
// the user acpflow runs as: the default deny list holds for both homes,
// and the record lists both.
func TestAnAgentWithAnotherHomeCannotReadTheUsersKeys(t *testing.T) {
	w := newSandboxWorld(t)
	userHome := t.TempDir()
	userKey := writeFile(t, userHome, ".ssh/id_rsa", plantedKey)
	w.env = []string{"HOME=" + userHome}
	tries := map[string]string{
		"read:" + userKey: "ERR EACCES",
		"read:" + w.key:   "ERR EACCES",
		"write:" + filepath.Join(w.ws, "inside.txt"): "ok",
	}
	t.Run("unconfined, both keys are readable", func(t *testing.T) {
		s := w.run(t, "", nil, "read:"+userKey)
		s.mustSucceed(t)
		s.want(t, map[string]string{"read:" + userKey: "ok"})
	})
	t.Run("sandboxed, neither is", func(t *testing.T) {
		s := w.run(t, "sandbox: true", nil, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		rec := s.checkEnforced(t, w, "on")
		if deny := strList(rec["deny"]); !strings.Contains(strings.Join(deny, "\n"), filepath.Join(userHome, ".ssh")) {
			t.Errorf("sandbox.deny = %v; want %s in it", deny, filepath.Join(userHome, ".ssh"))
		}
	})
}

// Sandboxed steps one after another, each started in a sandbox launcher
// acpflow started ahead while the step before ran (internal/sandbox's
// Start): each gets its own environment and its own confinement, as the
// first did, and when acpflow exits no launcher is left waiting.
func TestSandboxedStepsInARowAreEachConfined(t *testing.T) {
	skipWithoutSandbox(t)
	dir, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	var body strings.Builder
	body.WriteString("name: in-a-row\nsteps:\n")
	for i := range 4 {
		needs := ""
		if i > 0 {
			needs = fmt.Sprintf("\n    needs: [s%d]", i-1)
		}
		// The pause lets a launcher be started ahead for the next step.
		fmt.Fprintf(&body, `  - id: s%d%s
    run: |
      echo "value: $STEP_VALUE"
      echo "pid: $$"
      %s
      %s
      sleep 0.3
    env: {STEP_VALUE: "v%d", OUTSIDE: %q}
    sandbox: true
`, i, needs, tryWrite("cwd", fmt.Sprintf("s%d.txt", i)), tryWrite("outside", fmt.Sprintf(`"$OUTSIDE/s%d"`, i)), i, outside)
	}
	r, st := runConfined(t, dir, ws, body.String(), nil)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for i := range 4 {
		id := fmt.Sprintf("s%d", i)
		got := outcomes(st[id])
		if got["value"] != fmt.Sprintf("v%d", i) || got["cwd"] != "ok" || got["outside"] != "denied" {
			t.Errorf("step %s: %v; want its own value, the cwd written and the outside denied", id, got)
		}
		if sb := st[id].Sandbox; sb == nil || !sb.Enforced {
			t.Errorf("step %s: sandbox %+v, want enforced", id, sb)
		}
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Errorf("written from inside a sandbox: %v", es)
	}
	assertNoProcessFrom(t, binDir)
}
