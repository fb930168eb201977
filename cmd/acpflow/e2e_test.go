package main

// End-to-end tests: the real acpflow binary, run as a user would, on YAML
// files, against real agents over real pipes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/workflows"
)

var (
	acpflowBin   string // the binary under test
	testAgent    string // internal/testagent
	binDir       string
	systemPolicy string // the system's outer policy file of acpflowBin (none unless a test writes it)
)

func TestMain(m *testing.M) {
	if report := os.Getenv(launchReportVar); report != "" {
		launchAndReport(report, os.Args[1:])
	}
	var err error
	binDir, err = os.MkdirTemp("", "acpflow-e2e-")
	if err != nil {
		panic(err)
	}
	os.Chmod(binDir, 0o755)
	// Runs are recorded in a store of the tests' own, never the user's.
	os.Setenv("ACPFLOW_STATE", filepath.Join(binDir, "state.db"))
	// No outer policy but the tests' own: the system's file is one under
	// binDir, in this process and in the binary (-X, as a packager sets
	// it), and the user's config directory is the tests'.
	systemPolicy = filepath.Join(binDir, "etc", "acpflow", "policy.yaml")
	workflows.SystemPolicyFile = systemPolicy
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(binDir, "config"))
	os.Unsetenv(workflows.PolicyEnv)
	acpflowBin = filepath.Join(binDir, "acpflow")
	testAgent = filepath.Join(binDir, "testagent")
	b := exec.Command("go", "build", "-o", acpflowBin,
		"-ldflags", "-X github.com/acpflow/acpflow/workflows.SystemPolicyFile="+systemPolicy,
		"github.com/acpflow/acpflow/cmd/acpflow")
	b.Stderr = os.Stderr
	if err := b.Run(); err != nil {
		panic("building acpflow: " + err.Error())
	}
	// The dedicated sandbox launcher beside it, as `go install ./cmd/...`
	// installs them.
	b = exec.Command("go", "build", "-o", filepath.Join(binDir, "acpflow-sandbox"), "github.com/acpflow/acpflow/cmd/acpflow-sandbox")
	b.Stderr = os.Stderr
	if err := b.Run(); err != nil {
		panic("building acpflow-sandbox: " + err.Error())
	}
	if err := agentrecord.Build(testAgent); err != nil {
		panic("building the test agent: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// result is what one acpflow invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func acpflow(t *testing.T, dir string, args ...string) result {
	t.Helper()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	cmd := exec.Command(acpflowBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
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

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// writeWorkflow writes a workflow into dir and returns its path.
func writeWorkflow(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentYAML renders the test agent as a YAML flow list of args.
func agentArgs(args ...string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

func readRecords(t *testing.T, path string) []map[string]any { return agentrecord.Read(path) }

// assertAgentsGone proves every process the test agent recorded is gone.
func assertAgentsGone(t *testing.T, path string) { agentrecord.AssertGone(t, path) }

// assertNoProcessFrom proves that no process runs a binary built for the
// tests (acpflow itself, its demo agent, the test agent) once a command
// has returned.
func assertNoProcessFrom(t testing.TB, dir string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || !strings.HasPrefix(exe, dir+"/") {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:]); f[0][0] != 'Z' {
			t.Errorf("process %s (%s) is still running", e.Name(), exe)
		}
	}
}

func TestVersionAgentsAndProbe(t *testing.T) {
	dir := t.TempDir()
	if r := acpflow(t, dir, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "acpflow ") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
	// The narrow table is TestAgentsFitsEightyColumns's; --wide has
	// every column and each preset's coverage line.
	r := acpflow(t, dir, "agents", "--wide")
	for _, p := range []string{"claude", "codex", "gemini", "goose", "opencode", "qwen", "demo"} {
		if !strings.Contains(r.stdout, p) {
			t.Errorf("agents does not list %s:\n%s", p, r.stdout)
		}
	}
	// Each preset's row shows the mode it starts its agent in, and what
	// was measured, from the preset itself.
	for _, p := range acpagent.Presets() {
		row := ""
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, p.Name+" ") {
				row = line
				break
			}
		}
		f := strings.Fields(row)
		if len(f) < 3 || f[1] != orDash(p.Mode) || f[2] != orDash(p.Version) {
			t.Errorf("agents: the row of %s is %q; want its mode %q and version %q", p.Name, row, p.Mode, p.Version)
		}
		if !strings.Contains(r.stdout, "\n"+p.Name+": ") {
			t.Errorf("agents: no coverage line for %s", p.Name)
		}
	}
	r = acpflow(t, dir, "probe", "--", testAgent, "-session-id", "probe-1")
	if r.code != 0 {
		t.Fatalf("probe: exit %d\n%s", r.code, r.stderr)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("probe printed no JSON: %v\n%s", err, r.stdout)
	}
	if info["protocol_version"] != 1.0 || info["session_id"] != "probe-1" {
		t.Errorf("probe = %v", info)
	}
	r = acpflow(t, dir, "probe", "--", testAgent, "-require-auth", "key")
	if !strings.Contains(r.stdout, "Authentication required") || !strings.Contains(r.stdout, `"id": "key"`) {
		t.Errorf("probe of an agent that needs auth:\n%s", r.stdout)
	}
	r = acpflow(t, dir, "probe", "--auth", "key", "--", testAgent, "-require-auth", "key")
	if !strings.Contains(r.stdout, `"session_id"`) {
		t.Errorf("probe with --auth:\n%s", r.stdout)
	}
	if r := acpflow(t, dir, "probe", "--", "no-such-agent-xyz"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("probe of a missing command: %d %s", r.code, r.stderr)
	}
}

func TestHelloRunsOnTheDemoAgentAndWritesTheResult(t *testing.T) {
	root := repoRoot(t)
	out := filepath.Join(t.TempDir(), "results.jsonl")
	r := acpflow(t, root, "run", "workflows/examples/hello.yaml", "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("the view does not say it succeeded:\n%s", r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one result line, got %d", len(lines))
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_id", "workflow", "status", "inputs", "outputs", "started_at", "duration_ms", "steps"} {
		if _, ok := res[k]; !ok {
			t.Errorf("result lacks %q", k)
		}
	}
	if res["status"] != "succeeded" {
		t.Errorf("status = %v", res["status"])
	}
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(res["started_at"])); err != nil {
		t.Errorf("started_at is not RFC 3339: %v", res["started_at"])
	}
	for id, s := range res["steps"].(map[string]any) {
		st := s.(map[string]any)
		for _, k := range []string{"status", "stop_reason", "output", "error", "attempts", "duration_ms", "session_id", "permissions"} {
			if _, ok := st[k]; !ok {
				t.Errorf("step %s lacks %q", id, k)
			}
		}
		if st["session_id"] == "" || st["session_id"] == res["run_id"] {
			t.Errorf("step %s session id %q must be the agent's, not the run id", id, st["session_id"])
		}
		if !strings.Contains(fmt.Sprint(st["output"]), "demo agent") {
			t.Errorf("step %s output = %q", id, st["output"])
		}
	}
}

func TestJSONPrintsTheEventStream(t *testing.T) {
	root := repoRoot(t)
	r := acpflow(t, root, "run", "workflows/examples/hello.yaml", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if e["run_id"] == "" || e["time"] == nil {
			t.Errorf("event without run_id or time: %s", line)
		}
		if _, ok := e["step"]; !ok {
			t.Errorf("event without step (docs/results.md: every event has one): %s", line)
		}
		seen[fmt.Sprint(e["type"])]++
	}
	for _, typ := range []string{"run_start", "step_start", "step_update", "permission", "step_end", "run_end"} {
		if seen[typ] == 0 {
			t.Errorf("no %s event (saw %v)", typ, seen)
		}
	}
}

func TestAFailingStepExitsOneWithTheAgentsStderr(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: crash
agents:
  bad: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: bad, prompt: hi}
`, testAgent, agentArgs("-record", record, "-crash-on", "session/prompt")))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--output", out)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "crashing on session/prompt") || !strings.Contains(string(b), `"stop_reason":"error"`) {
		t.Errorf("result lacks the stderr tail or stop reason: %s", b)
	}
	assertAgentsGone(t, record)
}

func TestInvalidUsageExitsTwoAndStartsNothing(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: inputs
inputs:
  n: {type: number, required: true}
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: "n=${{ inputs.n }}"}
`, testAgent, agentArgs("-record", record)))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"a missing required input", []string{"run", wf}},
		{"an undeclared input", []string{"run", wf, "--input", "n=1", "--input", "x=2"}},
		{"a value of the wrong type", []string{"run", wf, "--input", "n=many"}},
		{"an unknown flag", []string{"run", wf, "--no-such-flag"}},
		{"a missing file", []string{"run", filepath.Join(dir, "missing.yaml")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acpflow(t, dir, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
				t.Errorf("stack trace printed:\n%s", r.stderr)
			}
		})
	}
	if readRecords(t, record) != nil {
		t.Error("an agent was started")
	}
	if r := acpflow(t, dir, "run", wf, "--input", "n=42"); r.code != 0 {
		t.Errorf("a valid run: exit %d\n%s", r.code, r.stderr)
	}
}

func TestSIGINTCancelsTearsDownAndExits130(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: hang
agents:
  slow: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: slow, prompt: hi}
`, testAgent, agentArgs("-record", record, "-prompt-hang", "-setsid-grandchild")))
	out := filepath.Join(dir, "out.jsonl")
	cmd := exec.Command(acpflowBin, "run", wf, "--output", out)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for !hasEvent(t, record, "prompt") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the agent never got the prompt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit = %v, want 130\n%s", err, stderr.String())
	}
	if !hasEvent(t, record, "cancel") {
		t.Error("the agent never got session/cancel")
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `"status":"cancelled"`) {
		t.Errorf("result: %s", b)
	}
	assertAgentsGone(t, record)
}

func hasEvent(t *testing.T, record, event string) bool {
	for _, r := range readRecords(t, record) {
		if r["event"] == event {
			return true
		}
	}
	return false
}

func TestTheSDKsExampleAgentRunsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the example agent sleeps about 5 s by design")
	}
	dir := t.TempDir()
	agent := filepath.Join(binDir, "sdk-example-agent")
	b := exec.Command("go", "build", "-o", agent, "github.com/coder/acp-go-sdk/example/agent")
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example agent: %v\n%s", err, out)
	}
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: sdk-example
agents:
  example: {command: %s}
policies:
  permission: allow
steps:
  - id: s
    uses: acp-subagent
    with: {agent: example, prompt: "hello from acpflow"}
`, agent))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Steps map[string]struct {
			StopReason  string           `json:"stop_reason"`
			Output      string           `json:"output"`
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	data, _ := os.ReadFile(out)
	json.Unmarshal(data, &res)
	s := res.Steps["s"]
	if s.StopReason != "completed" || s.Output == "" {
		t.Errorf("step = %+v", s)
	}
	if len(s.Permissions) == 0 || s.Permissions[0]["decision"] != "allow" || s.Permissions[0]["outcome"] != "selected" {
		t.Errorf("the example's permission request was not answered by the policy: %+v", s.Permissions)
	}
}

func TestANonEnterableCwdFailsTheStepAsAnUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	// As root, access(X_OK) passes on any directory: run acpflow as nobody.
	dir, err := os.MkdirTemp("", "acpflow-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	locked := filepath.Join(dir, "locked")
	os.Mkdir(locked, 0o700) // owned by root: nobody cannot enter it
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: locked
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: hi, cwd: locked}
`, testAgent, agentArgs("-record", record)))
	out := filepath.Join(dir, "out.jsonl")
	cmd := exec.Command(acpflowBin, "run", wf, "--workspace", dir, "--output", out, "--state", filepath.Join(dir, "state.db"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1\n%s", err, stderr.String())
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "cannot be entered") || !strings.Contains(string(b), locked) {
		t.Errorf("result: %s", b)
	}
	if readRecords(t, record) != nil {
		t.Error("the agent was spawned")
	}
}

func TestSchemaPrintsTheWorkflowSchema(t *testing.T) {
	r := acpflow(t, t.TempDir(), "schema")
	var schema map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &schema) != nil || schema["properties"] == nil {
		t.Errorf("schema: exit %d, %.200s", r.code, r.stdout)
	}
}

func TestValidateReportsEveryBrokenFileWithItsPosition(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(repoRoot(t), "workflows", "examples", "hello.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: bad\nsteps:\n  - id: a\n    uses: acp-subagent\n    neds: [b]\n"), 0o644)
	r := acpflow(t, dir, "validate", good, bad)
	if r.code != 2 {
		t.Errorf("exit %d, want 2", r.code)
	}
	if !strings.Contains(r.stdout, "hello.yaml: ok") {
		t.Errorf("the good file is not reported ok:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, bad+":5:5:") || !strings.Contains(r.stderr, `did you mean "needs"`) {
		t.Errorf("the error lacks position or suggestion:\n%s", r.stderr)
	}
}

func TestASecondInterruptKillsWithoutWaitingForTheGraces(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: stubborn
agents:
  mule:
    command: %s
    args: %s
    dispose: {eof-grace: 30s, term-grace: 30s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: mule, prompt: hi}
`, testAgent, agentArgs("-record", record, "-prompt-hang", "-ignore-eof", "-trap-term")))
	cmd := exec.Command(acpflowBin, "run", wf)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for !hasEvent(t, record, "prompt") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	for !hasEvent(t, record, "eof") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	begin := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit = %v, want 130", err)
	}
	// A hang guard below the first grace (30 s): a run that waited for a
	// grace took that long; a skipped one ends in a second or two even on
	// a loaded machine.
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("the second interrupt took %s to end the run; the graces were not skipped", d)
	}
	assertAgentsGone(t, record)
}

// BenchmarkValidate200StepsProcess is a whole `acpflow validate` process
// on a 200-step workflow (target: ≤ 50 ms).
func BenchmarkValidate200StepsProcess(b *testing.B) {
	dir := b.TempDir()
	var sb strings.Builder
	sb.WriteString("name: big\ninputs:\n  task: {type: string, default: x}\nagents:\n  demo: {builtin: demo}\nsteps:\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&sb, "  - id: s%d\n    uses: acp-subagent\n", i)
		if i > 0 {
			fmt.Fprintf(&sb, "    needs: [s%d]\n    if: steps.s%d.status == \"succeeded\"\n", i-1, i-1)
		}
		fmt.Fprintf(&sb, "    with:\n      agent: demo\n      prompt: \"do ${{ inputs.task }} after ${{ %s }}\"\n", map[bool]string{true: "run.id", false: fmt.Sprintf("steps.s%d.output", max(i-1, 0))}[i == 0])
	}
	path := filepath.Join(dir, "big.yaml")
	os.WriteFile(path, []byte(sb.String()), 0o644)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := exec.Command(acpflowBin, "validate", path).CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
}

func TestABatchKilledHalfWayIsFinishedByResumeWithoutRedoingWork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 400 agent steps")
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	state := filepath.Join(dir, "state.db")
	results := filepath.Join(dir, "results.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: batch
inputs:
  n: {type: number, required: true}
agents:
  a: {command: %s, args: %s}
steps:
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: "first ${{ inputs.n }}"}}
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: a, prompt: "second ${{ inputs.n }}"}}
`, testAgent, agentArgs("-record", record, "-prompt-delay", "20ms")))
	var in strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "inputs.jsonl")
	os.WriteFile(inputs, []byte(in.String()), 0o644)

	cmd := exec.Command(acpflowBin, "run", wf, "--inputs", inputs, "--concurrency", "8", "--output", results, "--state", state)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for countLines(results) < 80 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL: no teardown, no last words
	cmd.Wait()
	killedAt := countLines(results)
	if killedAt >= 200 {
		t.Fatalf("the batch finished before the kill (%d results)", killedAt)
	}

	// What the store says succeeded before resume must not run again.
	r := acpflow(t, dir, "runs", "--json", "--limit", "0", "--state", state)
	var batchID string
	succeeded := map[string]bool{} // "first 12" → recorded succeeded
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var run map[string]any
		json.Unmarshal([]byte(line), &run)
		batchID, _ = run["batch_id"].(string)
		d := acpflow(t, dir, "show", fmt.Sprint(run["run_id"]), "--json", "--state", state)
		var detail struct {
			Inputs map[string]any `json:"inputs"`
			Steps  map[string]struct {
				Status string `json:"status"`
			} `json:"steps"`
		}
		json.Unmarshal([]byte(d.stdout), &detail)
		for id, st := range detail.Steps {
			if st.Status == "succeeded" {
				succeeded[fmt.Sprintf("%s %v", id, detail.Inputs["n"])] = true
			}
		}
	}
	if batchID == "" {
		t.Fatalf("no batch recorded:\n%s", r.stdout)
	}

	res := acpflow(t, dir, "resume", batchID, "--output", results, "--state", state)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}

	prompts := map[string]int{}
	for _, rec := range readRecords(t, record) {
		if rec["event"] == "prompt" {
			prompts[agentrecord.PromptText(rec)]++
		}
	}
	for key := range succeeded {
		if prompts[key] != 1 {
			t.Errorf("step %q had succeeded before the kill but was prompted %d times", key, prompts[key])
		}
	}
	for i := 0; i < 200; i++ {
		for _, step := range []string{"first", "second"} {
			if prompts[fmt.Sprintf("%s %d", step, i)] == 0 {
				t.Errorf("step %s of input %d never ran", step, i)
			}
		}
	}

	// Every input has exactly one result, every line whole.
	seen := map[float64]int{}
	data, _ := os.ReadFile(results)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var res struct {
			Status string         `json:"status"`
			Inputs map[string]any `json:"inputs"`
		}
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("a torn or invalid result line: %q", line)
		}
		if res.Status != "succeeded" {
			t.Errorf("a run %s: %s", res.Status, line)
		}
		seen[res.Inputs["n"].(float64)]++
	}
	for i := 0; i < 200; i++ {
		if seen[float64(i)] != 1 {
			t.Errorf("input %d has %d results", i, seen[float64(i)])
		}
	}
	assertAgentsGone(t, record)
	t.Logf("killed after %d of 200 results; %d steps had succeeded", killedAt, len(succeeded))
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

func TestAWASMPermissionPolicyAnswersARunsPermissionRequests(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(repoRoot(t), "wasm", "examples", "prebuilt", "c.wasm")
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: strict
agents:
  a: {command: %s, args: %s}
policies:
  permission: {wasm: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs("-record", record, "-no-chunks", "-permission", "read:/etc/hosts", "-permission", "execute:make && rm -rf x", "-permission", "execute:ls -la"), module))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var res struct {
		Steps map[string]struct {
			Output      string `json:"output"`
			Permissions []struct {
				Decision, OptionID, Rule, Policy, Reason string
			} `json:"permissions"`
		} `json:"steps"`
	}
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	s := res.Steps["s"]
	want := "permission read /etc/hosts: opt-allow-once\npermission execute make && rm -rf x: opt-reject-once\npermission execute ls -la: opt-reject-once\n"
	if s.Output != want {
		t.Errorf("the agent saw %q, want %q", s.Output, want)
	}
	if len(s.Permissions) != 3 {
		t.Fatalf("permissions = %+v", s.Permissions)
	}
	for i, want := range []string{"allow", "reject", "reject"} {
		p := s.Permissions[i]
		if p.Decision != want || p.Rule != "c.wasm" || p.Policy != "workflow" || p.Reason == "" {
			t.Errorf("permission %d = %+v, want %s by c.wasm with a reason", i, p, want)
		}
	}
}

func TestAWASMEnvPolicyThatDeniesRefusesTheSpawn(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(repoRoot(t), "wasm", "examples", "prebuilt", "c.wasm")
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: envdeny
agents:
  a: {command: %s, args: %s}
policies:
  env: {wasm: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs("-record", record), module))
	out := filepath.Join(dir, "out.jsonl")
	// The example env policy denies a spawn whose environment has no HOME.
	cmd := exec.Command(acpflowBin, "run", wf, "--output", out)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ACPFLOW_STATE=" + filepath.Join(dir, "state.db")}
	if err := cmd.Run(); err == nil {
		t.Fatal("the run succeeded")
	}
	data, _ := os.ReadFile(out)
	if !strings.Contains(string(data), "refused the spawn: no HOME") {
		t.Errorf("result: %s", data)
	}
	if readRecords(t, record) != nil {
		t.Error("the agent was spawned")
	}
	// With HOME, the module's proposal (AWS_* removed) is the child's env.
	cmd = exec.Command(acpflowBin, "run", wf)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "AWS_REGION=eu-west-1", "EDITOR=vi", "ACPFLOW_STATE=" + filepath.Join(dir, "state.db")}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	env := readRecords(t, record)[0]["env"].(map[string]any)
	if env["EDITOR"] != "vi" || env["AWS_REGION"] != nil || env["HOME"] != "/root" {
		t.Errorf("child env = %v", env)
	}
}

func TestPolicyEvalOnAPolicyFileAndAWorkflowStep(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "pol.yaml")
	os.WriteFile(pol, []byte(`permission:
  rules:
    - if: tool.kind in ["read", "search"]
      then: allow
    - if: 'any(commands(tool.command), # startsWith "rm ")'
      then: reject
      reason: destructive
  default: cancel
env:
  inherit: core
`), 0o644)
	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"kind": "permission", "workspace": "/ws", "cwd": "/ws",
 "tool": {"id": "c1", "kind": "execute", "title": "x", "raw_input": {"command": ["/bin/bash", "-lc", "make && rm -rf x"]}},
 "options": [{"id": "a1", "name": "Allow", "kind": "allow_once"}, {"id": "r1", "name": "Reject", "kind": "reject_once"}]}`), 0o644)
	env := filepath.Join(dir, "env.json")
	os.WriteFile(env, []byte(`{"kind": "env", "ambient": {"PATH": "/bin", "OPENAI_API_KEY": "sk", "EDITOR": "vi"}, "explicit": {"K": "v"}}`), 0o644)

	decode := func(r result) map[string]any {
		t.Helper()
		var m map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		return m
	}
	if m := decode(acpflow(t, dir, "policy", "eval", pol, "--request", req)); m["decision"] != "reject" || m["rule"] != "2" || m["reason"] != "destructive" {
		t.Errorf("permission answer = %v", m)
	}
	if m := decode(acpflow(t, dir, "policy", "eval", pol, "--request", env)); fmt.Sprint(m["env"]) != "map[K:v PATH:/bin]" {
		t.Errorf("env answer = %v", m)
	}
	wf := filepath.Join(repoRoot(t), "workflows", "examples", "hello.yaml")
	if m := decode(acpflow(t, dir, "policy", "eval", wf, "--step", "greet", "--request", req)); m["decision"] != "allow" || m["policy"] != "step" {
		t.Errorf("step policy answer = %v", m)
	}
	if m := decode(acpflow(t, dir, "policy", "eval", wf, "--step", "summarize", "--request", req)); m["decision"] != "reject" || m["policy"] != "default" {
		t.Errorf("default policy answer = %v", m)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("permission:\n  rules:\n    - {if: 'tool.kidn == \"x\"', then: allow}\n"), 0o644)
	if r := acpflow(t, dir, "policy", "eval", bad, "--request", req); r.code != 2 || !strings.Contains(r.stderr, "bad.yaml:3:") || !strings.Contains(r.stderr, `did you mean "kind"`) {
		t.Errorf("bad policy: exit %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "weird.json"), []byte(`{"kind": "other"}`), 0o644)
	if r := acpflow(t, dir, "policy", "eval", pol, "--request", filepath.Join(dir, "weird.json")); r.code != 2 {
		t.Errorf("a request of an unknown kind: exit %d", r.code)
	}
}

func TestResumeRerunsOnlyWhatFailedAndRefusesAChangedWorkflow(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	state := filepath.Join(dir, "state.db")
	// "second" fails the first time: its cwd does not exist yet.
	body := fmt.Sprintf(`name: resumable
agents:
  a: {command: %s, args: %s}
steps:
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: "first"}}
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: a, prompt: "second ${{ steps.first.output }}", cwd: later}}
`, testAgent, agentArgs("-record", record, "-chunk", "one"))
	wf := writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir); r.code != 1 {
		t.Fatalf("first run: exit %d, want 1 (second's cwd is missing)\n%s", r.code, r.stderr)
	}
	var res struct {
		RunID string `json:"run_id"`
	}
	data, _ := os.ReadFile(out)
	json.Unmarshal(data, &res)

	// A changed workflow file is refused without --force.
	os.WriteFile(wf, []byte(body+"# changed\n"), 0o644)
	if r := acpflow(t, dir, "resume", res.RunID, "--state", state); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("resume of a changed workflow: exit %d\n%s", r.code, r.stderr)
	}

	os.Mkdir(filepath.Join(dir, "later"), 0o755)
	r := acpflow(t, dir, "resume", res.RunID[:12], "--state", state, "--force", "--output", out)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	prompts := 0
	for _, rec := range readRecords(t, record) {
		if rec["event"] == "prompt" {
			text := agentrecord.PromptText(rec)
			if text == "first" {
				prompts++
			}
			if strings.HasPrefix(text, "second") && text != "second one" {
				t.Errorf("second got %q: the first step's recorded output did not feed it", text)
			}
		}
	}
	if prompts != 1 {
		t.Errorf("the first step ran %d times; it had succeeded and must not run again", prompts)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, out)), "\n")
	var last struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last.RunID != res.RunID || last.Status != "succeeded" {
		t.Errorf("the resumed run = %+v, want %s succeeded", last, res.RunID)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTimeoutTakesADurationOrSeconds(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: slow
agents:
  hang: {command: %s, args: ["-prompt-hang"]}
steps:
  - {id: s, uses: acp-subagent, with: {agent: hang, prompt: hi}}
`, testAgent))
	for _, tc := range []struct{ value, want string }{{"300ms", "run timed out after 300ms"}, {"1", "run timed out after 1s"}} {
		out := filepath.Join(dir, tc.value+".jsonl")
		r := acpflow(t, dir, "run", wf, "--timeout", tc.value, "--output", out)
		if r.code != 1 || !strings.Contains(readFile(t, out), tc.want) {
			t.Errorf("--timeout %s: exit %d, result %s", tc.value, r.code, readFile(t, out))
		}
	}
	if r := acpflow(t, dir, "run", wf, "--timeout", "soon"); r.code != 2 || !strings.Contains(r.stderr, "number of seconds") {
		t.Errorf("--timeout soon: exit %d\n%s", r.code, r.stderr)
	}
}
