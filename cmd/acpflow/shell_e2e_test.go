package main

// Shell steps (docs/shell.md) through the binary: `run:` beside agent
// steps, with each engine feature a step has (needs, outputs, for-each,
// retries, continue-on-error, timeout, if:, resume).

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shellRun is what one `acpflow run` of a workflow with shell steps did:
// the exit code, its output and the result JSON it wrote.
type shellRun struct {
	result
	res struct {
		RunID   string            `json:"run_id"`
		Status  string            `json:"status"`
		Error   string            `json:"error"`
		Outputs map[string]any    `json:"outputs"`
		Steps   map[string]shellR `json:"steps"`
	}
}

type shellR struct {
	Status     string `json:"status"`
	StopReason string `json:"stop_reason"`
	Output     any    `json:"output"`
	Error      string `json:"error"`
	Attempts   int    `json:"attempts"`
	ExitCode   *int   `json:"exit_code"`
}

// runShellWorkflow writes body as dir/wf.yaml and runs it with args,
// results to dir/out.json (replaced each time).
func runShellWorkflow(t *testing.T, dir, body string, args ...string) shellRun {
	t.Helper()
	writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.json")
	os.Remove(out)
	var r shellRun
	r.result = acpflow(t, dir, append([]string{"run", "wf.yaml", "--output", out}, args...)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result JSON (exit %d)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal(b, &r.res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, b)
	}
	return r
}

// copySleep copies sleep into a directory of the test's own, so that
// assertNoProcessFrom can prove no copy of it outlives a run.
func copySleep(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"/bin/sleep", "/usr/bin/sleep"} {
		src, err := os.Open(p)
		if err != nil {
			continue
		}
		defer src.Close()
		dst, err := os.OpenFile(filepath.Join(dir, "sleep"), os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		dst.Close()
		return filepath.Join(dir, "sleep")
	}
	t.Skip("no sleep binary")
	return ""
}

func exitCodeOf(s shellR) string {
	if s.ExitCode == nil {
		return "absent"
	}
	return strconv.Itoa(*s.ExitCode)
}

// The pipeline: an agent reviews, and a test gate, written as
// `run:`, reads the review through ${{ steps.review.output }} (in the
// command line and in env:); what the gate's command left running in the
// background is gone when the run ends; the gate's stdout is its output
// and the run's.
func TestShellGateAfterAnAgentReview(t *testing.T) {
	dir := t.TempDir()
	sleep := copySleep(t)
	r := runShellWorkflow(t, dir, `name: gate
agents: {demo: {builtin: demo}}
steps:
  - id: review
    uses: acp-subagent
    with: {agent: demo, prompt: "Review the code"}
  - id: test
    needs: review
    run: |
      `+sleep+` 1000 &
      test -n "$REVIEW"
      echo "first line: ${{ steps.review.output }}" | head -1
    env: {REVIEW: "${{ steps.review.output }}"}
outputs:
  gate: ${{ steps.test.output }}
`)
	t.Cleanup(func() { assertNoProcessFrom(t, filepath.Dir(sleep)) })
	if r.code != 0 || r.res.Status != "succeeded" {
		t.Fatalf("exit %d, status %s\nstderr: %s", r.code, r.res.Status, r.stderr)
	}
	want := "first line: demo agent received: Review the code\n"
	if got := r.res.Steps["test"]; got.Output != want || exitCodeOf(got) != "0" {
		t.Errorf("test step: output %q, exit_code %s; want %q and 0", got.Output, exitCodeOf(got), want)
	}
	if r.res.Outputs["gate"] != want {
		t.Errorf("outputs.gate = %q", r.res.Outputs["gate"])
	}
	if r.res.Steps["review"].ExitCode != nil {
		t.Errorf("the agent step has an exit_code: %d", *r.res.Steps["review"].ExitCode)
	}
	assertNoProcessFrom(t, filepath.Dir(sleep))
}

// A failing command fails the run (exit 1), and the result says how it
// exited and what it wrote to stderr; a step with continue-on-error fails
// alone, and its dependants run.
func TestShellFailureAndContinueOnError(t *testing.T) {
	dir := t.TempDir()
	r := runShellWorkflow(t, dir, `name: fail
steps:
  - id: lint
    run: |
      echo "lint: 2 problems" >&2
      exit 3
`)
	lint := r.res.Steps["lint"]
	if r.code != 1 || r.res.Status != "failed" || lint.Status != "failed" || exitCodeOf(lint) != "3" {
		t.Fatalf("exit %d, run %s, step %s, exit_code %s; want 1, failed, failed, 3\nstderr: %s", r.code, r.res.Status, lint.Status, exitCodeOf(lint), r.stderr)
	}
	if !strings.Contains(lint.Error, "exited with code 3") || !strings.Contains(lint.Error, "lint: 2 problems") {
		t.Errorf("error = %q; want the exit code and the stderr tail", lint.Error)
	}
	if !strings.Contains(r.stdout+r.stderr, "exited with code 3") {
		t.Errorf("the terminal does not say how the command exited:\n%s%s", r.stdout, r.stderr)
	}

	r = runShellWorkflow(t, dir, `name: soft
steps:
  - id: lint
    run: exit 4
    continue-on-error: true
  - id: after
    needs: lint
    run: echo "lint said ${{ steps.lint.status }}"
  - id: on_four
    needs: lint
    if: steps.lint.exit_code == 4
    run: echo "exit ${{ steps.lint.exit_code }}"
  - id: on_zero
    needs: lint
    if: steps.lint.exit_code == 0
    run: echo never
`)
	if r.code != 0 || r.res.Status != "succeeded" {
		t.Fatalf("exit %d, status %s; want 0, succeeded\nstderr: %s", r.code, r.res.Status, r.stderr)
	}
	if l := r.res.Steps["lint"]; l.Status != "failed" || exitCodeOf(l) != "4" {
		t.Errorf("lint: %s, exit_code %s; want failed, 4", l.Status, exitCodeOf(l))
	}
	if a := r.res.Steps["after"]; a.Output != "lint said failed\n" {
		t.Errorf("after: %+v", a)
	}
	// steps.ID.exit_code is the code, for if: and templates alike.
	if s := r.res.Steps["on_four"]; s.Status != "succeeded" || s.Output != "exit 4\n" {
		t.Errorf("on_four (if: steps.lint.exit_code == 4): %+v", s)
	}
	if s := r.res.Steps["on_zero"]; s.Status != "skipped" {
		t.Errorf("on_zero (if: steps.lint.exit_code == 0): %+v", s)
	}
}

// for-each runs the command once per element with item in scope; retries
// run a failing command again; if: skips or runs it.
func TestShellForEachRetriesAndIf(t *testing.T) {
	dir := t.TempDir()
	r := runShellWorkflow(t, dir, `name: engine
steps:
  - id: each
    for-each: '["a", "b", "c"]'
    run: echo "file ${{ item }} at ${{ index }}"
  - id: flaky
    run: |
      n=$(cat count 2>/dev/null || echo 0)
      echo $((n + 1)) > count
      test $n -ge 1
      echo "passed on attempt $((n + 1))"
    retries: 2
  - id: when
    needs: flaky
    if: steps.flaky.output == "passed on attempt 2\n"
    run: echo ran
  - id: never
    needs: flaky
    if: steps.flaky.status == "failed"
    run: echo ran
`)
	if r.code != 0 || r.res.Status != "succeeded" {
		t.Fatalf("exit %d, status %s\nstderr: %s", r.code, r.res.Status, r.stderr)
	}
	each := r.res.Steps["each"]
	outs, _ := each.Output.([]any)
	if len(outs) != 3 || outs[0] != "file a at 0\n" || outs[2] != "file c at 2\n" || exitCodeOf(each) != "0" {
		t.Errorf("each: output %v, exit_code %s", each.Output, exitCodeOf(each))
	}
	if f := r.res.Steps["flaky"]; f.Attempts != 2 || f.Output != "passed on attempt 2\n" {
		t.Errorf("flaky: %d attempts, output %q; want 2 and the second's", f.Attempts, f.Output)
	}
	if s := r.res.Steps["when"]; s.Status != "succeeded" || s.Output != "ran\n" {
		t.Errorf("when: %+v", s)
	}
	if s := r.res.Steps["never"]; s.Status != "skipped" {
		t.Errorf("never: %+v; want skipped", s)
	}
}

// A step's timeout stops the command and everything it started, and fails
// the run, saying so; the result has no exit code (acpflow ended it).
func TestShellTimeoutStopsTheGroup(t *testing.T) {
	dir := t.TempDir()
	sleep := copySleep(t)
	r := runShellWorkflow(t, dir, `name: slow
steps:
  - id: slow
    run: `+sleep+` 1000 & `+sleep+` 1000
    timeout: 1s
`)
	s := r.res.Steps["slow"]
	if r.code != 1 || s.Status != "failed" || !strings.Contains(s.Error, "step timed out after 1s") || s.ExitCode != nil {
		t.Errorf("exit %d, step %s, error %q, exit_code %s; want 1, failed, the timeout, absent", r.code, s.Status, s.Error, exitCodeOf(s))
	}
	assertNoProcessFrom(t, filepath.Dir(sleep))
}

// resume after a failed shell step runs that step again, and not the
// steps that succeeded before it.
func TestShellResumeRerunsOnlyTheFailedStep(t *testing.T) {
	dir := t.TempDir()
	r := runShellWorkflow(t, dir, `name: resume
steps:
  - id: build
    run: echo built >> log; echo built
  - id: gate
    needs: build
    run: echo gate >> log; test -f fixed; echo "ok after ${{ steps.build.output }}"
`)
	if r.code != 1 || r.res.Steps["gate"].Status != "failed" {
		t.Fatalf("first run: exit %d, gate %+v", r.code, r.res.Steps["gate"])
	}
	if err := os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "resumed.json")
	res := acpflow(t, dir, "resume", r.res.RunID, "--output", out)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\nstderr: %s", res.code, res.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	if string(b) != "built\ngate\ngate\n" {
		t.Errorf("log = %q; want build once, gate twice", b)
	}
	var resumed struct {
		Status string            `json:"status"`
		Steps  map[string]shellR `json:"steps"`
	}
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &resumed); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	gate, build := resumed.Steps["gate"], resumed.Steps["build"]
	if resumed.Status != "succeeded" || gate.Output != "ok after built\n\n" || exitCodeOf(gate) != "0" || exitCodeOf(build) != "0" {
		t.Errorf("resumed: %s, gate %+v, build %+v; want succeeded, exit codes kept", resumed.Status, gate, build)
	}
}

// validate accepts shell steps and places errors in them on the key or
// value at fault.
func TestShellValidate(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, `name: ok
steps:
  - id: a
    run: go test ./...
    shell: bash
    env: {CGO_ENABLED: 0}
  - id: b
    uses: shell
    with: {run: make, cwd: sub}
`)
	if r := acpflow(t, dir, "validate", "wf.yaml"); r.code != 0 {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeWorkflow(t, dir, `name: bad
steps:
  - id: a
    run: go test ./...
    uses: acp-subagent
  - id: b
    run: make
    shell: node
`)
	r := acpflow(t, dir, "validate", "wf.yaml")
	if r.code != 2 {
		t.Errorf("validate: exit %d; want 2", r.code)
	}
	for _, want := range []string{
		`wf.yaml:5:5: step "a": run: and uses: together`,
		`wf.yaml:8:12: step "b": shell: unknown shell "node"`,
	} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("validate does not say %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// Under the default env policy a credential in acpflow's environment does
// not reach the command, and appears nowhere in the result or the store;
// the step's env: values do reach it.
func TestShellEnvPolicyKeepsCredentialsFromTheCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DEPLOY_TOKEN", "s3cret-deploy-value")
	t.Setenv("SHELL_E2E_PLAIN", "plain-value")
	r := runShellWorkflow(t, dir, `name: env
steps:
  - id: show
    run: 'echo "token=${DEPLOY_TOKEN-unset} plain=$SHELL_E2E_PLAIN mode=$MODE"'
    env: {MODE: "${{ workflow.name }}-ci"}
`)
	want := "token=unset plain=plain-value mode=env-ci\n"
	if r.code != 0 || r.res.Steps["show"].Output != want {
		t.Fatalf("exit %d, output %q; want %q\nstderr: %s", r.code, r.res.Steps["show"].Output, want, r.stderr)
	}
	shown := acpflow(t, dir, "show", r.res.RunID, "--json")
	out, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	for where, text := range map[string]string{"the result JSON": string(out), "show --json": shown.stdout, "the terminal": r.stdout + r.stderr} {
		if strings.Contains(text, "s3cret-deploy-value") {
			t.Errorf("%s holds the credential:\n%s", where, text)
		}
	}
	if !strings.Contains(shown.stdout, `"exit_code": 0`) {
		t.Errorf("show --json has no exit_code:\n%s", shown.stdout)
	}
	if human := acpflow(t, dir, "show", r.res.RunID); !strings.Contains(human.stdout, "exit code: 0") {
		t.Errorf("show does not say the exit code:\n%s", human.stdout)
	}
}
