//go:build realagents

package realagents_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// gatewayUpstream is where each preset's gateway forwards: the model
// server at the path the agent's provider has (OpenAI's base ends in /v1).
var gatewayUpstream = map[string]string{
	"claude": "", "gemini": "", "codex": "/v1", "opencode": "/v1", "qwen": "/v1",
}

// gatewayCanaryVar holds the canary key in acpflow's own environment.
const gatewayCanaryVar = "REALAGENTS_GATEWAY_KEY"

// Each preset's real agent, under `gateway:` in its YAML, completes a
// whole turn: acpflow starts the gateway and points the agent at it (the
// agentsetup's own base URL and key in env: are replaced), the model
// server gets the canary key, the usage is the model server's, and the
// canary appears nowhere in the agent's process tree (environ, cmdline)
// while it runs, nor in any file under its HOME, its TMPDIR or acpflow's
// output.
func TestRealAgentsCompleteATurnThroughTheGateway(t *testing.T) {
	canary := "sk-canary-" + rand.Text()
	os.Setenv(gatewayCanaryVar, canary)
	t.Cleanup(func() { os.Unsetenv(gatewayCanaryVar) })
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		if _, ok := gatewayUpstream[ta.name]; !ok {
			t.Skipf("the %s preset names no gateway variables yet (docs/gateway.md)", ta.name)
		}
		sent := &modelserver.Usage{Input: 321, Output: 54, CacheRead: 7}
		srv, err := modelserver.Start(modelserver.Script{{Say: "Answered through the gateway.", Usage: sent}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		gw := fmt.Sprintf("gateway: {key: \"${{ env.%s }}\", upstream: %q}", gatewayCanaryVar, srv.URL()+gatewayUpstream[ta.name])
		agentYAML := s.turnAgentYAML(ta, srv, gw)
		if ta.name == "opencode" {
			s.opencodeOnOpenAI()
		}
		path := s.writeWorkflowFile(fmt.Sprintf("name: turn\nagents:\n%s\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: \"Say hello.\"}\n", agentYAML))
		watch := s.watchForCanary(canary)
		res, es, r := s.runTurn(path)
		seen := watch()
		if res.Status != "succeeded" || !strings.Contains(res.Output, "Answered through the gateway.") {
			t.Errorf("step %+v\nstderr:\n%s", res.stepResult, r.stderr)
		}
		if seen.procs == 0 {
			t.Errorf("the watch saw none of the agent's processes")
		}
		for _, where := range seen.leaks {
			t.Errorf("the key is in %s", where)
		}
		var out struct {
			Steps map[string]struct {
				Usage map[string]any `json:"usage"`
			} `json:"steps"`
		}
		b, _ := os.ReadFile(filepath.Join(s.dir, "results.jsonl"))
		json.Unmarshal(b, &out)
		u := out.Steps["s"].Usage
		t.Logf("usage %v", u)
		// The turn's own request is among the agent's model requests
		// (claude also asks for a title), each metered as the server said.
		turns := 0
		for _, e := range es {
			if e["kind"] != "gateway_exchange" {
				continue
			}
			t.Logf("exchange %v %v %v: %v, usage %v, error %v, refusal %v", e["method"], e["path"], e["model"], e["status"], e["usage"], e["error"], e["refusal"])
			x, _ := e["usage"].(map[string]any)
			if x["output_tokens"] == float64(sent.Output) && x["cache_read_tokens"] == float64(sent.CacheRead) {
				turns++
			}
		}
		if turns == 0 || u["source"] != "gateway" || u["output_tokens"].(float64) < float64(sent.Output) {
			t.Errorf("usage = %v, want the model server's (%d exchanges metered its turn), metered by the gateway", u, turns)
		}
		creds := srv.Credentials()
		if len(creds) == 0 {
			t.Errorf("no request reached the model server")
		}
		for _, c := range creds {
			if !strings.HasSuffix(c, " "+canary) {
				t.Errorf("%s reached the model server without the key", strings.Fields(c)[:2])
			}
		}
		for _, text := range []string{r.stdout, r.stderr} {
			if strings.Contains(text, canary) {
				t.Error("the key is in acpflow's output")
			}
		}
		for _, dir := range append([]string{s.dir}, seen.tmpdirs...) {
			filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, _ := os.ReadFile(path); strings.Contains(string(b), canary) {
						t.Errorf("the key is in %s", path)
					}
				}
				return nil
			})
		}
	})
}

// opencodeOnOpenAI moves agentsetup's provider of opencode to the id
// "openai", the provider the preset's gateway wiring points (a user's
// openai/* models). The key and base URL the file still gives it are
// agentsetup's dummies; the preset's OPENCODE_CONFIG_CONTENT must win.
func (s *sandbox) opencodeOnOpenAI() {
	s.t.Helper()
	path := filepath.Join(s.home, ".config", "opencode", "opencode.json")
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		s.t.Fatal(err)
	}
	providers := cfg["provider"].(map[string]any)
	// opencode's own OpenAI client (the Responses API), as for a user's
	// openai/* model: not the openai-compatible package.
	openai := providers["scripted"].(map[string]any)
	delete(openai, "npm")
	delete(openai, "name")
	providers["openai"] = openai
	delete(providers, "scripted")
	cfg["model"] = "openai/scripted-model"
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// canaryWatch is what watchForCanary saw of the agent's process tree.
type canaryWatch struct {
	procs   int      // distinct processes of the agent's seen
	leaks   []string // where the canary was
	tmpdirs []string // the TMPDIRs the agent's processes had
}

// watchForCanary looks, every 50 ms until the returned func is called, at
// every process that carries the sandbox's mark (the agent's tree) for the
// canary in its environ and command line, and notes its TMPDIR.
func (s *sandbox) watchForCanary(canary string) func() canaryWatch {
	mark := markVar + "=" + s.mark + "\n"
	var mu sync.Mutex
	w := canaryWatch{}
	seen, leaked, tmp := map[int]bool{}, map[string]bool{}, map[string]bool{}
	look := func() {
		for _, p := range survivors(func(p proc) bool { return strings.Contains(p.environ, mark) }) {
			mu.Lock()
			if !seen[p.pid] {
				seen[p.pid] = true
				w.procs++
			}
			for what, text := range map[string]string{"environ": p.environ, "cmdline": p.cmdline} {
				if where := fmt.Sprintf("the %s of %s", what, p); strings.Contains(text, canary) && !leaked[where] {
					leaked[where] = true
					w.leaks = append(w.leaks, where)
				}
			}
			for _, kv := range strings.Split(p.environ, "\n") {
				if d, ok := strings.CutPrefix(kv, "TMPDIR="); ok && d != "" && !tmp[d] {
					tmp[d] = true
					w.tmpdirs = append(w.tmpdirs, d)
				}
			}
			mu.Unlock()
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			look()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() canaryWatch {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return w
	}
}

// A provider that refuses the key: claude retries a 401 with backoff until
// the step times out (measured: 14 requests in 40 s), so acpflow ends the
// turn at the first refusal for good, and the step fails at once naming
// it.
func TestClaudeBehindAGatewayFailsTheStepOnTheProvidersRefusal(t *testing.T) {
	s := newSandbox(t)
	ta := needTurnAgent(t, "claude")
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	defer refuse.Close()
	srv, err := modelserver.Start(modelserver.Script{{Say: "never"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv(gatewayCanaryVar, "sk-wrong-"+rand.Text())
	gw := fmt.Sprintf("gateway: {key: \"${{ env.%s }}\", upstream: %q}", gatewayCanaryVar, refuse.URL)
	path := s.writeWorkflowFile(fmt.Sprintf("name: turn\nagents:\n%s\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: \"Say hello.\"}\n", s.turnAgentYAML(ta, srv, gw)))
	res, es, r := s.runTurn(path)
	for _, e := range es {
		if e["kind"] == "gateway_exchange" {
			t.Logf("exchange %v %v: %v %v", e["method"], e["path"], e["status"], e["error_kind"])
		}
	}
	t.Logf("step %s %s: %.300s", res.Status, res.StopReason, res.Error)
	if res.Status != "failed" || !strings.HasPrefix(res.Error, "the provider refused: authentication (401): authentication_error: invalid x-api-key") {
		t.Errorf("step %s: %q, want failed naming the 401\nstderr:\n%s", res.Status, res.Error, r.stderr)
	}
	if r.elapsed > time.Minute {
		t.Errorf("the run took %s: the turn was not ended at the refusal", r.elapsed)
	}
}

// gatewayReplayAgents are the presets whose recorded turns replay offline:
// claude (Anthropic Messages), codex (OpenAI Responses), qwen (OpenAI Chat
// Completions) and gemini. opencode is not among them: the model server
// does not know the shell tool of its openai provider, so the scripted
// turn cannot be recorded.
var gatewayReplayAgents = []string{"claude", "codex", "qwen", "gemini"}

// A turn recorded through the gateway (record: true) replays with the
// real agent and no model server: the agent is started again as it was,
// its gateway answers from the recording, it runs the same tools under
// the same policy and ends its turn with the same words; no key is read
// (none is set) and the recording holds none.
func TestRealAgentsReplayAGatewayRecordedTurnOffline(t *testing.T) {
	for _, name := range gatewayReplayAgents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ta := newSandbox(t), needTurnAgent(t, name)
			canary := "sk-canary-" + rand.Text()
			srv, err := modelserver.Start(replayScript(s.dir))
			if err != nil {
				t.Fatal(err)
			}
			gw := fmt.Sprintf("gateway: {key: %q, upstream: %q, record: true}", canary, srv.URL()+gatewayUpstream[name])
			agentYAML := s.turnAgentYAML(ta, srv, gw)
			_, env := s.turnAgentEnv(ta, srv)
			if name == "opencode" {
				s.opencodeOnOpenAI()
			}
			stepYAML := fmt.Sprintf("steps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: %q}\n", replayPrompt)
			policies := "policies:\n" + indent(recordPolicy, "  ") + "\n"
			rec, _, r := s.flowOne("run", s.writeWorkflowFile("name: turn\nagents:\n"+agentYAML+"\n"+policies+stepYAML), "--workspace", s.dir)
			served := len(srv.Requests())
			srv.Close()
			want := rec.Steps["s"]
			if want.Status != "succeeded" || !strings.Contains(want.Output, "FINAL done") || served == 0 {
				t.Fatalf("recording: step %+v after %d model requests\nstderr:\n%s", want.stepResult, served, r.stderr)
			}
			// The recorded turn's work is undone: the replay must do it again.
			os.RemoveAll(filepath.Join(s.dir, "made"))
			os.Remove(filepath.Join(s.dir, "written.txt"))

			envJSON, _ := json.Marshal(env)
			replayWF := fmt.Sprintf("name: turn\nagents:\n  a:\n    builtin: replay\n    from: %s/s\n    env: %s\n%s%s", rec.RunID, envJSON, policies, stepYAML)
			start := time.Now()
			got, es, r := s.flowOne("run", s.writeWorkflowFile(replayWF), "--workspace", s.dir)
			g := got.Steps["s"]
			t.Logf("recorded in %d ms with %d model requests; replayed in %s", want.DurationMS, served, time.Since(start))
			for _, f := range []struct{ name, got, want string }{
				{"status", g.Status, want.Status}, {"stop_reason", g.StopReason, want.StopReason},
				{"final", g.Final, want.Final}, {"output", g.Output, want.Output},
			} {
				if f.got != f.want {
					t.Errorf("replayed %s = %q, recorded %q", f.name, f.got, f.want)
				}
			}
			if g.Error != "" {
				t.Errorf("replay failed: %s\nstderr:\n%s", g.Error, r.stderr)
			}
			if len(g.Permissions) != len(want.Permissions) {
				t.Errorf("replay asked %d permissions, recorded %d", len(g.Permissions), len(want.Permissions))
			}
			if b, err := os.ReadFile(filepath.Join(s.dir, "made", "shell.txt")); err != nil || string(b) != "recorded\n" {
				t.Errorf("the replayed agent did not run the command again: %q, %v", b, err)
			}
			for _, e := range es {
				if e["kind"] == "gateway_exchange" {
					t.Logf("replayed exchange %v %v %v: %v", e["method"], e["path"], e["model"], e["status"])
				}
				if e["kind"] == "warning" {
					t.Logf("warning: %v", e["message"])
				}
			}
			export := s.acpflow(time.Minute, "export", rec.RunID, "--state", filepath.Join(s.dir, "state.db"))
			t.Logf("the exported recording is %d bytes", len(export.stdout))
			if !strings.Contains(export.stdout, `"exchanges"`) {
				t.Errorf("the export holds no model exchanges")
			}
			store, _ := os.ReadFile(filepath.Join(s.dir, "state.db"))
			wal, _ := os.ReadFile(filepath.Join(s.dir, "state.db-wal"))
			for what, text := range map[string]string{"export": export.stdout, "store": string(store) + string(wal), "replay's output": r.stdout + r.stderr} {
				if strings.Contains(text, canary) {
					t.Errorf("the key is in the %s", what)
				}
			}
		})
	}
}
