//go:build realagents

// Package realagents_test drives acpflow against real third-party ACP
// agents, installed from npm at pinned versions (package.json and its
// lockfile, `bash realagents/install.sh`), offline and without real keys.
// What can be proved that way: the handshake, the agents' own
// authentication errors reaching the step's error, a dummy key getting
// codex past session/new, a cancel mid-prompt, and that no process of any
// agent outlives acpflow.
//
// Run with `bash realagents/run.sh`, or, once installed,
// `go test -tags realagents ./realagents/ -v -count=1`. Nothing is
// downloaded at test time.
package realagents_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// markVar is set in every agent's explicit env. Descendants inherit it, so
// a process that renames itself (claude-agent-sdk's CLI becomes "claude")
// or leaves the process group is still found by it. Its name must not
// start with ACPFLOW_: acpflow keeps its own settings from its children.
const markVar = "REALAGENTS_TEST_MARK"

var (
	acpflowBin  string // the binary under test
	binDir      string
	nodeModules string // realagents/node_modules, absolute
	installed   bool   // node_modules/.bin exists
	runMark     string // this test binary's prefix of every mark
)

// agent is one real ACP agent as the tests spawn it.
type agent struct {
	name string
	bin  string   // under node_modules/.bin
	args []string // after bin
	env  []string // KEY=VALUE needed besides HOME and the mark
}

// The agents under test. claude-agent-acp is @agentclientprotocol's,
// what the claude preset runs.
var (
	claudeAgent = agent{name: "claude-agent-acp", bin: "claude-agent-acp", env: []string{"IS_SANDBOX=1"}}
	codex       = agent{name: "codex-acp", bin: "codex-acp"}
	gemini      = agent{name: "gemini", bin: "gemini", args: []string{"--acp"}}
)

func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	nodeModules = filepath.Join(wd, "node_modules")
	if st, err := os.Stat(filepath.Join(nodeModules, ".bin")); err == nil && st.IsDir() {
		installed = true
	}
	binDir, err = os.MkdirTemp("", "acpflow-realagents-")
	if err != nil {
		panic(err)
	}
	acpflowBin = filepath.Join(binDir, "acpflow")
	// No outer policy but a test's own --policy: the binary's system file
	// is one under binDir that no test writes (as a packager sets it, -X),
	// and the user's config directory is the tests'.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(binDir, "config"))
	os.Unsetenv("ACPFLOW_POLICY")
	b := exec.Command("go", "build", "-o", acpflowBin,
		"-ldflags", "-X github.com/acpflow/acpflow/workflows.SystemPolicyFile="+filepath.Join(binDir, "etc", "acpflow", "policy.yaml"),
		"github.com/acpflow/acpflow/cmd/acpflow")
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	if err := b.Run(); err != nil {
		panic("building acpflow: " + err.Error())
	}
	// The sandbox launcher beside it, as `go install ./cmd/...` installs
	// them: sandboxed agents start through it.
	b = exec.Command("go", "build", "-o", filepath.Join(binDir, "acpflow-sandbox"), "github.com/acpflow/acpflow/cmd/acpflow-sandbox")
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	if err := b.Run(); err != nil {
		panic("building acpflow-sandbox: " + err.Error())
	}
	runMark = "run" + strconv.Itoa(os.Getpid())
	code := m.Run()
	// Whatever the tests said, nothing may be left once they are all done:
	// no agent (by the mark its descendants inherit) and no acpflow.
	if left := survivors(func(p proc) bool {
		// Only this test binary's: another one may be running agents from
		// the same node_modules.
		return strings.Contains(p.environ, markVar+"="+runMark+"/") || strings.HasPrefix(p.exe, binDir+"/")
	}); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "realagents: %d processes outlived the tests:\n", len(left))
		for _, p := range left {
			fmt.Fprintf(os.Stderr, "  %s\n", p)
		}
		killAll(left)
		code = 1
	}
	os.RemoveAll(binDir)
	os.Exit(code)
}

// needAgents skips the test when the agents are not installed.
func needAgents(t *testing.T) {
	t.Helper()
	if !installed {
		t.Skip("the real agents are not installed: run `bash realagents/install.sh` (npm ci in realagents/) first")
	}
}

// sandbox is one test's private world: a workspace, a HOME the agents may
// scribble in (and find no login in), a run store and a mark.
type sandbox struct {
	t    *testing.T
	dir  string
	home string
	mark string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	needAgents(t)
	dir := t.TempDir()
	s := &sandbox{t: t, dir: dir, home: filepath.Join(dir, "home"), mark: runMark + "/" + t.Name()}
	if err := os.Mkdir(s.home, 0o755); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after every acpflow of the test.
	t.Cleanup(s.assertNothingLeft)
	return s
}

// env is what the agent gets explicitly, on top of acpflow's scrubbed env.
func (s *sandbox) env(a agent, extra ...string) []string {
	return append(append([]string{"HOME=" + s.home, markVar + "=" + s.mark}, a.env...), extra...)
}

func (s *sandbox) command(a agent) string {
	return filepath.Join(nodeModules, ".bin", a.bin)
}

// run is one acpflow invocation.
type run struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// acpflow runs the binary with a hard deadline. Past it, acpflow gets
// SIGINT (it then tears every agent down), then SIGKILL 30 s later; the
// test fails either way, and the cleanup still looks for survivors.
func (s *sandbox) acpflow(deadline time.Duration, args ...string) run {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, acpflowBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	begin := time.Now()
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(begin)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		s.t.Errorf("acpflow %s: still running after the hard deadline of %s\nstderr:\n%s", strings.Join(args, " "), deadline, r.stderr)
		r.code = -1
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		s.t.Fatal(err)
	}
	return r
}

// probe runs `acpflow probe` on an agent and decodes what it printed.
func (s *sandbox) probe(a agent, flags []string, extraEnv ...string) (probeInfo, run) {
	s.t.Helper()
	args := []string{"probe", "--timeout", "60s", "--cwd", s.dir}
	for _, kv := range s.env(a, extraEnv...) {
		args = append(args, "--env", kv)
	}
	args = append(append(append(args, flags...), "--", s.command(a)), a.args...)
	r := s.acpflow(2*time.Minute, args...)
	var info probeInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		s.t.Fatalf("probe printed no JSON (exit %d): %v\nstdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	}
	return info, r
}

type probeInfo struct {
	ProtocolVersion   int               `json:"protocol_version"`
	AgentInfo         map[string]any    `json:"agent_info"`
	AgentCapabilities map[string]any    `json:"agent_capabilities"`
	AuthMethods       []json.RawMessage `json:"auth_methods"`
	SessionID         string            `json:"session_id"`
	SessionError      string            `json:"session_error"`
	Teardown          string            `json:"teardown"`
	Stderr            string            `json:"stderr"`
}

func (p probeInfo) authIDs() []string {
	var ids []string
	for _, m := range p.AuthMethods {
		var v struct {
			ID string `json:"id"`
		}
		json.Unmarshal(m, &v)
		ids = append(ids, v.ID)
	}
	return ids
}

// workflow writes a one-step workflow on agent a and runs it with --json
// and --output; agentYAML is added under the agent (auth, dispose, …),
// stepYAML under the step (timeout, …).
func (s *sandbox) workflow(a agent, agentYAML, stepYAML string, extraEnv ...string) (stepResult, []event, run) {
	s.t.Helper()
	env := map[string]string{}
	for _, kv := range s.env(a, extraEnv...) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	envJSON, _ := json.Marshal(env)
	argsJSON, _ := json.Marshal(a.args)
	if a.args == nil {
		argsJSON = []byte("[]")
	}
	wf := fmt.Sprintf(`name: real
agents:
  a:
    command: %q
    args: %s
    env: %s
%s
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: "Say hello."}
%s
`, s.command(a), argsJSON, envJSON, indent(agentYAML, "    "), indent(stepYAML, "    "))
	path := filepath.Join(s.dir, "wf.yaml")
	if err := os.WriteFile(path, []byte(wf), 0o644); err != nil {
		s.t.Fatal(err)
	}
	out := filepath.Join(s.dir, "results.jsonl")
	r := s.acpflow(4*time.Minute, "run", path, "--json", "--timeout", "180s",
		"--workspace", s.dir, "--state", filepath.Join(s.dir, "state.db"), "--output", out)
	var res struct {
		Status string                `json:"status"`
		Steps  map[string]stepResult `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil {
		s.t.Fatalf("no result in %s (exit %d): %v\nstdout:\n%s\nstderr:\n%s", out, r.code, err, r.stdout, r.stderr)
	}
	return res.Steps["s"], events(s.t, r.stdout), r
}

type stepResult struct {
	Status     string `json:"status"`
	StopReason string `json:"stop_reason"`
	Output     string `json:"output"`
	Error      string `json:"error"`
	SessionID  string `json:"session_id"`
	DurationMS int64  `json:"duration_ms"`
}

type event map[string]any

func events(t *testing.T, stdout string) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Errorf("--json printed a line that is not JSON: %q", sc.Text())
			continue
		}
		out = append(out, e)
	}
	return out
}

// update returns the first step_update of this kind, or nil.
func update(es []event, kind string) event {
	for _, e := range es {
		if e["type"] == "step_update" && e["kind"] == kind {
			return e
		}
	}
	return nil
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// firstLine is an error's first line, for logs: the rest is the stderr tail.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func TestProbeCompletesTheHandshake(t *testing.T) {
	for _, tc := range []struct {
		agent   agent
		name    string // agent_info.name
		authIDs []string
		// what session/new says without credentials: a session id, or this error
		sessionErr string
	}{
		// claude-agent-acp offers no auth methods to a client that declares
		// no terminal auth (acpflow): it reads ANTHROPIC_API_KEY.
		{claudeAgent, "@agentclientprotocol/claude-agent-acp", nil, ""},
		{codex, "@agentclientprotocol/codex-acp", []string{"api-key", "chat-gpt"}, "Authentication required (code -32000)"},
		{gemini, "gemini-cli", []string{"gateway", "gemini-api-key", "oauth-personal", "vertex-ai"}, "Gemini API key is missing or not configured. (code -32000)"},
	} {
		t.Run(tc.agent.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			info, r := s.probe(tc.agent, nil)
			if r.code != 0 {
				t.Errorf("exit %d\n%s", r.code, r.stderr)
			}
			t.Logf("%s %v: protocol %d, auth methods %v, session %q, session error %q, teardown %s (%s in all)",
				tc.name, info.AgentInfo["version"], info.ProtocolVersion, info.authIDs(), info.SessionID, info.SessionError, info.Teardown, r.elapsed.Round(time.Millisecond))
			if info.ProtocolVersion != 1 {
				t.Errorf("protocol_version = %d, want 1", info.ProtocolVersion)
			}
			if info.AgentInfo["name"] != tc.name {
				t.Errorf("agent_info = %v, want name %q", info.AgentInfo, tc.name)
			}
			if info.AgentCapabilities["loadSession"] != true || info.AgentCapabilities["promptCapabilities"] == nil {
				t.Errorf("agent_capabilities = %v", info.AgentCapabilities)
			}
			if ids := info.authIDs(); !sameSet(ids, tc.authIDs) {
				t.Errorf("auth methods = %v, want %v", ids, tc.authIDs)
			}
			if tc.sessionErr == "" {
				if info.SessionID == "" {
					t.Errorf("no session: %q\n%s", info.SessionError, info.Stderr)
				}
			} else if info.SessionID != "" || info.SessionError != tc.sessionErr {
				t.Errorf("session %q, error %q; want the agent's error %q", info.SessionID, info.SessionError, tc.sessionErr)
			}
			if info.Teardown == "" {
				t.Error("probe does not say how the agent was torn down")
			}
		})
	}
}

// As root, Claude Code refuses to start unless IS_SANDBOX is set, and the
// adapter then fails session/new with an internal error ("… cannot be used
// with root/sudo privileges …", startupFailureReason bypass_root): why the
// claude preset's notes ask for IS_SANDBOX=1.
func TestClaudeAsRootWithoutIsSandboxFailsSessionNew(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root is refused")
	}
	for _, a := range []agent{claudeAgent} {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			a.env = nil
			info, _ := s.probe(a, nil)
			t.Logf("session error %q; stderr %q", info.SessionError, firstLine(info.Stderr))
			if info.SessionID != "" || !strings.Contains(info.SessionError, "cannot be used with root/sudo privileges") {
				t.Errorf("session %q, error %q", info.SessionID, info.SessionError)
			}
		})
	}
}

func TestProbeWithADummyKeyAndAuthGetsASession(t *testing.T) {
	for _, tc := range []struct {
		agent  agent
		method string
		key    string
	}{
		{codex, "api-key", "CODEX_API_KEY=sk-acpflow-dummy"},
		{gemini, "gemini-api-key", "GEMINI_API_KEY=acpflow-dummy"},
	} {
		t.Run(tc.agent.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			info, r := s.probe(tc.agent, []string{"--auth", tc.method}, tc.key)
			t.Logf("session %q, error %q, teardown %s", info.SessionID, info.SessionError, info.Teardown)
			if r.code != 0 || info.SessionID == "" || info.SessionError != "" {
				t.Errorf("exit %d, session %q, error %q\n%s", r.code, info.SessionID, info.SessionError, r.stderr)
			}
		})
	}
}

func TestWithoutCredentialsTheStepFailsWithTheAgentsOwnError(t *testing.T) {
	for _, tc := range []struct {
		agent   agent
		err     string // the step's error starts with this
		session bool   // session/new succeeded, so a session id is recorded
	}{
		// As a bare command (no preset: claude, so no mode: default),
		// claude-agent-acp 0.101.0 starts its session in mode auto, and the
		// mode guard fails the step before the prompt. With the preset, the
		// prompt fails with "Authentication required (code -32000)".
		{claudeAgent, `agent a: the agent switched to mode "auto", in which it decides alone`, false},
		{codex, "agent a: session/new failed: Authentication required (code -32000)", false},
		{gemini, "agent a: session/new failed: Gemini API key is missing or not configured. (code -32000)", false},
	} {
		t.Run(tc.agent.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			step, es, r := s.workflow(tc.agent, "", "")
			t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
			if r.code != 1 {
				t.Errorf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			if step.Status != "failed" || step.StopReason != "error" {
				t.Errorf("step %s/%s, want failed/error", step.Status, step.StopReason)
			}
			if !strings.HasPrefix(step.Error, tc.err) {
				t.Errorf("error = %q\nwant it to start with %q", step.Error, tc.err)
			}
			if got := step.SessionID != ""; got != tc.session {
				t.Errorf("session id %q; want one recorded: %v", step.SessionID, tc.session)
			}
			if e := update(es, "teardown"); e == nil {
				t.Error("no teardown event")
			} else {
				t.Logf("teardown: tier %v in %v ms", e["tier"], e["duration_ms"])
			}
		})
	}
}

// A dummy CODEX_API_KEY, passed explicitly, and auth: api-key get
// codex-acp 2.6.0 past session/new; the prompt then fails on the network.
// Offline, codex 0.166 never fails the turn on a refused connection: it
// reports "Reconnecting... waiting for network" (session_info_update
// _meta.codex.error) with a growing backoff (5, 10, 20 s …), also with
// request_max_retries 0. So the step has a timeout, and what is proved is
// that the failure is the prompt's, not the session's.
func TestCodexWithAnAPIKeyGetsPastSessionNew(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	step, es, r := s.workflow(codex, "auth: api-key", "timeout: 30s", "CODEX_API_KEY=sk-acpflow-dummy")
	t.Logf("exit %d in %s; step %s/%s, session %q: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.SessionID, firstLine(step.Error))
	if r.code != 1 || step.Status != "failed" {
		t.Errorf("exit %d, step %s; want 1, failed", r.code, step.Status)
	}
	e := update(es, "session")
	if e == nil || e["session_id"] == "" || e["session_id"] == nil {
		t.Fatalf("no session event with a session id in --json:\n%s", r.stdout)
	}
	if step.SessionID != e["session_id"] {
		t.Errorf("result session_id %q, event %q", step.SessionID, e["session_id"])
	}
	if step.Error == "" || strings.Contains(step.Error, "Authentication required") || strings.Contains(step.Error, "session/new") {
		t.Errorf("error = %q, want a prompt failure that is not the session's auth error", firstLine(step.Error))
	}
	if _, err := os.Stat(filepath.Join(s.home, ".codex", "auth.json")); err == nil {
		t.Logf("note: codex-acp wrote the key to $HOME/.codex/auth.json on authenticate")
	}
}

// The step's timeout cancels codex mid-prompt (while it retries the
// network): session/cancel, aborted at once, then the full ladder with the
// default graces. codex-acp's npm shim does not forward SIGTERM to the
// codex binary, so only a signal to the whole group ends both.
func TestATimeoutMidPromptTearsCodexDown(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	// codex-acp 2.6.0 takes 1.5-2 s to a session alone, over 5 s with
	// other agents starting beside it.
	step, es, r := s.workflow(codex, "auth: api-key", "timeout: 15s", "CODEX_API_KEY=sk-acpflow-dummy")
	td := update(es, "teardown")
	t.Logf("exit %d in %s; step %s/%s: %s; teardown %v", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error), td)
	if r.code != 1 || step.Status != "failed" || step.StopReason != "aborted" {
		t.Errorf("exit %d, step %s/%s; want 1, failed/aborted\n%s", r.code, step.Status, step.StopReason, r.stderr)
	}
	if update(es, "session") == nil {
		t.Error("the step never got a session, so nothing was cancelled mid-prompt")
	}
	if update(es, "cancel_sent") == nil {
		t.Error("no session/cancel was sent")
	}
	if td == nil || td["error"] != nil {
		t.Errorf("teardown = %v", td)
	}
}

// proc is one process as /proc shows it.
type proc struct {
	pid     int
	state   byte
	exe     string
	cmdline string
	environ string
}

func (p proc) mentions(path string) bool {
	return strings.Contains(p.cmdline, path) || strings.HasPrefix(p.exe, path)
}

func (p proc) String() string {
	return fmt.Sprintf("pid %d (%c) exe %s: %s", p.pid, p.state, p.exe, p.cmdline)
}

// survivors lists the live (non-zombie) processes that match.
func survivors(match func(proc) bool) []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := "/proc/" + e.Name()
		stat, err := os.ReadFile(base + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		p := proc{pid: pid, state: stat[i+2]}
		p.exe, _ = os.Readlink(base + "/exe")
		cmd, _ := os.ReadFile(base + "/cmdline")
		p.cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		env, _ := os.ReadFile(base + "/environ")
		p.environ = string(bytes.ReplaceAll(env, []byte{0}, []byte{'\n'})) + "\n"
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// assertNothingLeft fails the test for every process that carries its
// mark, and kills them so that one failure does not leak into the next.
func (s *sandbox) assertNothingLeft() {
	mark := markVar + "=" + s.mark + "\n"
	left := survivors(func(p proc) bool { return strings.Contains(p.environ, mark) })
	for _, p := range left {
		s.t.Errorf("survived acpflow: %s", p)
	}
	killAll(left)
}

func killAll(ps []proc) {
	for _, p := range ps {
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
