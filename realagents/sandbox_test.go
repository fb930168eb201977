//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/egress"
	"github.com/acpflow/acpflow/internal/modelserver"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Issue 22's real-agent checks (SPEC §9 "Sandbox"): each real agent, with
// its preset's state dirs alone writable besides its workspace and temp
// dir, completes a whole scripted turn under `sandbox: true` and under a
// network list that holds only the model server (reached through the
// step's proxy, since Landlock refuses any other TCP connect); and a
// command the policy allows but that reaches outside (rm -rf ~/outside)
// fails inside the sandbox, the directory intact.
//
// Unlike the shared turn harness, the workspace here is a directory of its
// own (s.dir/ws), not the test's dir: HOME (s.dir/home) must lie outside
// the workspace, or ~/outside would be writable as part of the cwd.

// sandboxedAgents are the turn agents checked here, in order.
var sandboxedAgents = []string{"claude", "codex", "copilot", "gemini", "opencode", "qwen"}

// proxyFacts is, per agent, whether it sends its model requests through
// HTTP_PROXY/HTTPS_PROXY for a plain http:// base URL on loopback (acpflow
// sets NO_PROXY empty), as measured by TestSandboxProxyVariables: claude
// and codex send absolute-URI requests, copilot too, gemini, qwen (and opencode's own
// requests) tunnel with CONNECT even to http://. An agent that ignored
// them could not reach its model under a network list: Landlock refuses
// its direct connect.
var proxyFacts = map[string]bool{
	"claude":   true,
	"codex":    true,
	"copilot":  true,
	"gemini":   true,
	"opencode": true,
	"qwen":     true,
}

// freshHomeFails is, per agent, how its step fails when its first run in
// a HOME is sandboxed ("" where the turn completes). None since acpflow
// makes a preset's missing state dirs before the spawn; before that,
// opencode 1.18.33 failed at start making ~/.local (for
// ~/.local/share/opencode) and claude-agent-acp 0.101.0 kept nothing
// (mkdir ~/.claude refused, EACCES, 12 times).
var freshHomeFails = map[string]string{}

// listFails is, per agent, how its step fails under any network list
// ("" where it runs). Measured: opencode 1.18.33's ACP process serves
// itself over HTTP on loopback (bind 127.0.0.1:4096, then port 0), and
// Landlock refuses a sandbox with a network list every bind (EACCES):
// "Error: Unexpected error ServeError" on stderr, exit 1 at initialize.
// Its own requests to that server also honour the proxy variables
// (NO_PROXY is empty), so the list would have to hold it as well.
var listFails = map[string]string{
	"opencode": "during initialize",
}

// sandboxTurnResult is one sandboxed turn's outcome.
type sandboxTurnResult struct {
	step turnResult
	sb   sandboxRecord
	es   []event
	r    run
	reqs []modelserver.Request
}

// sandboxRecord is the step result's `sandbox`.
type sandboxRecord struct {
	Enforced    bool     `json:"enforced"`
	LandlockABI int      `json:"landlock_abi"`
	Write       []string `json:"write"`
	Deny        []string `json:"deny"`
	Network     string   `json:"network"`
	Allow       []string `json:"allow"`
	Refused     []string `json:"refused"`
	Warning     string   `json:"warning"`
}

// makeStateDirs makes the preset's state directories in HOME, as a HOME
// in which the agent ran before holds them: a missing one is not made
// writable in the sandbox (internal/sandbox skips it), and an agent that
// cannot make it fails (opencode) or keeps no state (claude); see
// TestSandboxWholeTurn. Entries naming a file (~/.claude/.credentials.json)
// are left.
func (s *sandbox) makeStateDirs(preset string) {
	s.t.Helper()
	p, ok := acpagent.LookupPreset(preset)
	if !ok {
		s.t.Fatalf("no preset %q", preset)
	}
	for _, d := range p.StateDirs {
		if strings.HasSuffix(d, ".json") {
			continue
		}
		if err := os.MkdirAll(filepath.Join(s.home, strings.TrimPrefix(d, "~/")), 0o700); err != nil {
			s.t.Fatal(err)
		}
	}
}

// workspace is the sandboxed turns' workspace, outside HOME.
func (s *sandbox) workspace() string {
	ws := filepath.Join(s.dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		s.t.Fatal(err)
	}
	return ws
}

// sandboxTurn runs a one-step workflow on ta against a model server
// playing script, under `permission: allow`, the agent carrying
// sandboxYAML (e.g. "sandbox: true"; "" for none), in s.workspace().
// sandboxYAML may hold PORT, replaced by the model server's port.
func (s *sandbox) sandboxTurn(ta *turnAgent, script modelserver.Script, sandboxYAML string, stepYAML ...string) sandboxTurnResult {
	s.t.Helper()
	return s.sandboxTurnEnv(ta, script, nil, sandboxYAML, stepYAML...)
}

// sandboxTurnEnv is sandboxTurn with env(model server port) added to the
// agent's env.
func (s *sandbox) sandboxTurnEnv(ta *turnAgent, script modelserver.Script, env func(port string) []string, sandboxYAML string, stepYAML ...string) sandboxTurnResult {
	s.t.Helper()
	srv, err := modelserver.Start(script)
	if err != nil {
		s.t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	if env != nil {
		extra := env(u.Port())
		adjusted, orig := *ta, ta.adjust
		adjusted.adjust = func(a *agentsetup.Agent) {
			if orig != nil {
				orig(a)
			}
			a.Env = append(a.Env, extra...)
		}
		ta = &adjusted
	}
	ws := s.workspace()
	wf := fmt.Sprintf(`name: sandboxed
agents:
%s
policies:
  permission: allow
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: "Do the steps."}
%s
`, s.turnAgentYAML(ta, srv, strings.ReplaceAll(sandboxYAML, "PORT", u.Port())), indent(strings.Join(stepYAML, "\n"), "    "))
	path := s.writeWorkflowFile(wf)
	out := filepath.Join(s.dir, "results.jsonl")
	os.Remove(out)
	r := s.acpflow(4*time.Minute, "run", path, "--json", "--timeout", "180s",
		"--workspace", ws, "--state", filepath.Join(s.dir, "state.db"), "--output", out)
	var res struct {
		Steps map[string]json.RawMessage `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil || res.Steps["s"] == nil {
		s.t.Fatalf("no result in %s (exit %d): %v\nworkflow:\n%s\nstdout:\n%s\nstderr:\n%s", out, r.code, err, wf, r.stdout, r.stderr)
	}
	var t sandboxTurnResult
	var sb struct {
		Sandbox *sandboxRecord `json:"sandbox"`
	}
	json.Unmarshal(res.Steps["s"], &t.step)
	json.Unmarshal(res.Steps["s"], &sb)
	if sb.Sandbox != nil {
		t.sb = *sb.Sandbox
	}
	t.es, t.r, t.reqs = events(s.t, r.stdout), r, srv.Requests()
	return t
}

// logTurn logs what a sandboxed turn did.
func logTurn(t *testing.T, st sandboxTurnResult) {
	t.Helper()
	t.Logf("exit %d in %s; step %s/%s; output %q; error %q", st.r.code, st.r.elapsed.Round(time.Millisecond), st.step.Status, st.step.StopReason, st.step.Output, firstLine(st.step.Error))
	t.Logf("sandbox: enforced %v, landlock ABI %d, network %s %v, refused %v, write %v, warning %q", st.sb.Enforced, st.sb.LandlockABI, st.sb.Network, st.sb.Allow, st.sb.Refused, st.sb.Write, st.sb.Warning)
	for _, q := range st.reqs {
		t.Logf("model request %s %s reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	for _, l := range denials(st.r.stderr) {
		t.Logf("stderr: %s", l)
	}
	for _, p := range st.step.Permissions {
		t.Logf("permission: kind %v, command %q, decision %v, outcome %v", p["kind"], p["command"], p["decision"], p["outcome"])
	}
}

// wholeTurnScript is a shell command writing a file in the workspace, a
// Write, and a final answer.
func wholeTurnScript(ws, name string) modelserver.Script {
	return modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "mkdir -p d && echo hi > d/shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: filepath.Join(ws, "written.txt"), Content: "written by " + name + "\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
}

// checkWholeTurn fails unless the turn completed and wrote both files.
func checkWholeTurn(t *testing.T, ws string, st sandboxTurnResult) {
	t.Helper()
	if st.r.code != 0 || st.step.Status != "succeeded" || st.step.StopReason != "completed" {
		t.Errorf("exit %d, step %s/%s; want 0, succeeded/completed: %s\nstderr:\n%s", st.r.code, st.step.Status, st.step.StopReason, st.step.Error, st.r.stderr)
	}
	if !strings.Contains(st.step.Output, "FINAL done") {
		t.Errorf("output %q lacks the final answer", st.step.Output)
	}
	for _, f := range []string{"d/shell.txt", "written.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("the turn did not create %s: %v", f, err)
		}
	}
}

// homeChanged lists the paths under home (to depth 3) modified since t:
// where the agent keeps its state.
func homeChanged(home string, since time.Time) []string {
	var out []string
	filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == home {
			return nil
		}
		rel, _ := filepath.Rel(home, p)
		if strings.Count(rel, "/") >= 3 {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !fi.ModTime().Before(since) {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// denials are the agent's stderr lines that say the kernel refused it
// something.
func denials(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		for _, w := range []string{"EACCES", "EPERM", "EROFS", "ermission denied", "not permitted", "ECONNREFUSED", "roxy"} {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// A whole turn unsandboxed (the wall to compare with), then sandboxed in
// the same HOME (as for a user who ran the agent before: its state dirs
// exist), then sandboxed in a fresh HOME (its first run ever is
// sandboxed: missing state dirs are not made writable).
func TestSandboxWholeTurn(t *testing.T) {
	for _, name := range sandboxedAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ta := needTurnAgent(t, name)
			s := newSandbox(t)
			for _, tc := range []struct {
				name, yaml       string
				fresh, makeState bool
			}{
				{"unsandboxed", "", false, false},
				{"sandboxed, HOME used before", "sandbox: true", false, false},
				{"sandboxed, fresh HOME", "sandbox: true", true, false},
				{"sandboxed, fresh HOME with state dirs made", "sandbox: true", true, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s := s
					if tc.fresh {
						s = newSandbox(t)
					}
					if tc.makeState {
						s.makeStateDirs(name)
					}
					ws := s.workspace()
					os.RemoveAll(ws)
					ws = s.workspace()
					begin := time.Now()
					st := s.sandboxTurn(ta, wholeTurnScript(ws, name), tc.yaml)
					logTurn(t, st)
					if fails := freshHomeFails[name]; tc.fresh && !tc.makeState && fails != "" {
						if st.step.Status != "failed" || !strings.Contains(st.step.Error, fails) {
							t.Errorf("step %s: %q; want it to fail with %q (its state dirs are missing, so not writable)", st.step.Status, st.step.Error, fails)
						}
						return
					}
					checkWholeTurn(t, ws, st)
					if tc.yaml != "" && !st.sb.Enforced {
						t.Errorf("sandbox record %+v: want enforced", st.sb)
					}
					t.Logf("HOME paths changed by the turn: %v", homeChanged(s.home, begin))
					t.Logf("WALL %s %s: %s", name, tc.name, st.r.elapsed.Round(time.Millisecond))
				})
			}
		})
	}
}

func TestSandboxNetworkListHoldsOnlyTheModelServer(t *testing.T) {
	for _, name := range sandboxedAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ta := needTurnAgent(t, name)
			s := newSandbox(t)
			s.makeStateDirs(name)
			ws := s.workspace()
			st := s.sandboxTurn(ta, wholeTurnScript(ws, name), "sandbox:\n  network: [\"127.0.0.1:PORT\"]")
			logTurn(t, st)
			if !st.sb.Enforced || st.sb.Network != "list" {
				t.Errorf("sandbox record %+v: want enforced, network list", st.sb)
			}
			if fails := listFails[name]; fails != "" {
				if st.step.Status != "failed" || !strings.Contains(st.step.Error, fails) || len(st.reqs) > 0 {
					t.Errorf("step %s: %q, %d model requests; want it to fail with %q before any", st.step.Status, st.step.Error, len(st.reqs), fails)
				}
				return
			}
			if proxyFacts[name] {
				checkWholeTurn(t, ws, st)
				return
			}
			// It ignores the proxy variables: its direct connect must have
			// been refused (no request reached the server), and the step
			// failed.
			if len(st.reqs) > 0 {
				t.Errorf("the model server got %d requests: a direct connection went through the sandbox", len(st.reqs))
			}
			if st.step.Status == "succeeded" {
				t.Errorf("step succeeded without the model server")
			}
		})
	}
}

// A network list without the model server: the proxy refuses it (and
// records it), and the kernel refuses the direct connect, so no request
// reaches the server.
func TestSandboxNetworkListWithoutTheModelServerReachesNothing(t *testing.T) {
	for _, name := range sandboxedAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ta := needTurnAgent(t, name)
			s := newSandbox(t)
			ws := s.workspace()
			script := wholeTurnScript(ws, name)
			st := s.sandboxTurn(ta, script, "sandbox:\n  network: [\"example.com:443\"]", "timeout: 60s")
			logTurn(t, st)
			if len(st.reqs) > 0 {
				t.Errorf("the model server got %d requests outside the network list", len(st.reqs))
			}
			if st.step.Status == "succeeded" && strings.Contains(st.step.Output, "FINAL done") {
				t.Errorf("the turn completed without the model server")
			}
			if _, err := os.Stat(filepath.Join(ws, "d", "shell.txt")); err == nil {
				t.Errorf("the scripted command ran without the model server")
			}
			if proxyFacts[name] && listFails[name] == "" && len(st.sb.Refused) == 0 {
				t.Errorf("the proxy recorded no refused host, though the agent honours the proxy variables")
			}
		})
	}
}

func TestSandboxKeepsRmOutsideTheWorkspace(t *testing.T) {
	for _, name := range sandboxedAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ta := needTurnAgent(t, name)
			s := newSandbox(t)
			s.makeStateDirs(name)
			s.workspace()
			inHome := filepath.Join(s.home, "outside")
			elsewhere := filepath.Join(t.TempDir(), "outside")
			for _, d := range []string{inHome, elsewhere} {
				mustWrite(t, filepath.Join(d, "keep.txt"), "precious\n")
			}
			script := modelserver.Script{
				{Say: "Cleaning home.", Shell: "rm -rf ~/outside; echo rc=$?"},
				{Say: "Cleaning elsewhere.", Shell: "rm -rf " + elsewhere + "; echo rc=$?"},
				{Say: "FINAL done"},
			}
			st := s.sandboxTurn(ta, script, "sandbox: true")
			logTurn(t, st)
			if !st.sb.Enforced {
				t.Errorf("sandbox record %+v: want enforced", st.sb)
			}
			for _, d := range []string{inHome, elsewhere} {
				if b, err := os.ReadFile(filepath.Join(d, "keep.txt")); err != nil || string(b) != "precious\n" {
					t.Errorf("%s is gone (%v): rm reached outside the sandbox", d, err)
				}
			}
			// The commands must have run (and failed), not been refused
			// by the agent: both asked and were allowed, and the model saw
			// the kernel's refusal.
			var cmds []string
			for _, p := range st.step.Permissions {
				if p["kind"] == "execute" {
					cmds = append(cmds, fmt.Sprint(p["command"]))
				}
			}
			if len(cmds) != 2 {
				t.Errorf("execute permissions %q; want both rm commands", cmds)
			}
			denied := 0
			for _, q := range st.reqs {
				if strings.Contains(string(q.Body), "Permission denied") || strings.Contains(string(q.Body), "Operation not permitted") {
					denied++
				}
			}
			if denied == 0 {
				t.Errorf("no model request carries the rm's refusal (Permission denied / Operation not permitted)")
			}
		})
	}
}

// Whether each agent sends its model requests through the proxy variables
// acpflow sets for a network list (egress.Proxy.Env: HTTP(S)_PROXY,
// ALL_PROXY, lower case too, NO_PROXY empty, NODE_USE_ENV_PROXY=1),
// measured without a sandbox, so that an agent that cannot run under a
// network list at all (opencode) is measured too: a proxy of the test's
// own, allowing only the model server, counts the requests it forwarded.
func TestSandboxProxyVariables(t *testing.T) {
	for _, name := range sandboxedAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ta := needTurnAgent(t, name)
			s := newSandbox(t)
			ws := s.workspace()
			var (
				mu      sync.Mutex
				via     []string
				proxied int
			)
			var proxy *egress.Proxy
			env := func(port string) []string {
				var err error
				// Any port of 127.0.0.1: opencode's ACP process talks to an
				// HTTP server of its own on loopback, through the proxy too.
				proxy, err = egress.Start([]string{"127.0.0.1"}, func(at egress.Attempt) {
					mu.Lock()
					defer mu.Unlock()
					via = append(via, fmt.Sprintf("%s %s:%d allowed %v status %d", at.Method, at.Host, at.Port, at.Allowed, at.Status))
					if fmt.Sprint(at.Port) == port && at.Allowed && at.Status == 200 {
						proxied++
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				return proxy.Env()
			}
			st := s.sandboxTurnEnv(ta, wholeTurnScript(ws, name), env, "")
			proxy.Close()
			logTurn(t, st)
			checkWholeTurn(t, ws, st)
			mu.Lock()
			defer mu.Unlock()
			seen := map[string]int{}
			for _, v := range via {
				seen[v]++
			}
			for v, n := range seen {
				t.Logf("through the proxy: %s (×%d)", v, n)
			}
			// A tunnel (CONNECT, gemini's and qwen's way even to an http://
			// URL) carries several requests, so the model server's count
			// may exceed the proxy's; that none went around the proxy is
			// what TestSandboxNetworkListHoldsOnlyTheModelServer proves.
			t.Logf("PROXY %s: %d requests or tunnels to the model server through the proxy; the server saw %d requests", name, proxied, len(st.reqs))
			if honours := proxied > 0; honours != proxyFacts[name] {
				t.Errorf("%s honours the proxy variables: %v; proxyFacts says %v", name, honours, proxyFacts[name])
			}
		})
	}
}
