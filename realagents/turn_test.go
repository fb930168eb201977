//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
)

// turnAgent is a real agent set up to complete whole turns offline against
// a scripted model server (modelserver) by agentsetup. Each agent's file
// registers one in turnAgents from its init.
type turnAgent struct {
	name string // agentsetup's
	// adjust, if set, changes what agentsetup returned: a preset's args or
	// env, as a workflow with `preset:` would get them.
	adjust func(*agentsetup.Agent)
	// endsTurnOnReject: the agent ends its turn (cancelled) when a tool
	// call is rejected, so a script cannot go on past one.
	endsTurnOnReject bool
	// refusesOutside is what the agent tells the model when it refuses,
	// without asking, a write whose path resolves outside its workspace
	// ("" if it asks).
	refusesOutside string
}

// turnAgents are the agents that complete whole turns, by name
// ("claude", "codex", "gemini").
var turnAgents = map[string]*turnAgent{}

// turnResult is one step's result as --output writes it, with the
// permission records.
type turnResult struct {
	stepResult
	Final       string           `json:"final"`
	JSON        any              `json:"json"` // a step with output-schema
	Permissions []map[string]any `json:"permissions"`
}

// turn runs a one-step workflow on ta against a model server playing
// script, with the step's prompt and the given policies: YAML (under
// `policies:`, may be "") and extra step keys (timeout:, …, may be "").
// It returns the step's result, the --json events, the acpflow run and the
// model server's request log.
func (s *sandbox) turn(ta *turnAgent, script modelserver.Script, prompt, policiesYAML, stepYAML string, acpflowArgs ...string) (turnResult, []event, run, []modelserver.Request) {
	s.t.Helper()
	srv, err := modelserver.Start(script)
	if err != nil {
		s.t.Fatal(err)
	}
	defer srv.Close()
	res, es, r := s.runTurn(s.writeTurnWorkflow(ta, srv, prompt, policiesYAML, stepYAML), acpflowArgs...)
	return res, es, r, srv.Requests()
}

// runTurn runs the one-step workflow at path and returns the step's
// result, the --json events and the acpflow run.
func (s *sandbox) runTurn(path string, acpflowArgs ...string) (turnResult, []event, run) {
	s.t.Helper()
	out := filepath.Join(s.dir, "results.jsonl")
	os.Remove(out)
	args := append([]string{"run", path, "--json", "--timeout", "180s",
		"--workspace", s.dir, "--state", filepath.Join(s.dir, "state.db"), "--output", out}, acpflowArgs...)
	r := s.acpflow(4*time.Minute, args...)
	var res struct {
		Status string                `json:"status"`
		Steps  map[string]turnResult `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil {
		wf, _ := os.ReadFile(path)
		s.t.Fatalf("no result in %s (exit %d): %v\nworkflow:\n%s\nstdout:\n%s\nstderr:\n%s", out, r.code, err, wf, r.stdout, r.stderr)
	}
	return res.Steps["s"], events(s.t, r.stdout), r
}

// modelEndpoint is where a turn's agent is pointed: a model server, or a
// model gateway in front of one.
type modelEndpoint interface{ URL() string }

// keyedEndpoint is an endpoint that takes only the key it names (a
// gateway's placeholder): the agent gets it in place of agentsetup's
// dummy key.
type keyedEndpoint interface {
	modelEndpoint
	AgentKey() string
}

// dummyKey is what every agentsetup dummy key contains.
const dummyKey = "acpflow-dummy"

// writeTurnWorkflow writes the one-step workflow of turn, with ta set up
// for srv, and returns its path.
func (s *sandbox) writeTurnWorkflow(ta *turnAgent, srv modelEndpoint, prompt, policiesYAML, stepYAML string) string {
	s.t.Helper()
	promptJSON, _ := json.Marshal(prompt)
	wf := fmt.Sprintf(`name: turn
agents:
%s
policies:
%s
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: %s}
%s
`, s.turnAgentYAML(ta, srv, ""), indent(policiesYAML, "  "), promptJSON, indent(stepYAML, "    "))
	if strings.TrimSpace(policiesYAML) == "" {
		wf = strings.Replace(wf, "policies:\n\n", "", 1)
	}
	return s.writeWorkflowFile(wf)
}

// turnAgentYAML sets ta up for srv and returns it as agent `a`, an entry
// under `agents:`, with agentYAML (reuse:, …, may be "") added under it.
func (s *sandbox) turnAgentYAML(ta *turnAgent, srv modelEndpoint, agentYAML string) string {
	s.t.Helper()
	a, env := s.turnAgentEnv(ta, srv)
	envJSON, _ := json.Marshal(env)
	// As a user writes it: the preset, with the local install as its
	// command. The preset keeps its own args, env, files, _meta and mode
	// (no mode: here), which is what is under test.
	return fmt.Sprintf("  a:\n    preset: %s\n    command: %q\n    env: %s\n%s\n%s",
		a.Name, a.Command, envJSON, indent(a.YAML(), "    "), indent(agentYAML, "    "))
}

// turnAgentEnv sets ta up for srv and returns it with the env its
// workflow gives it (the sandbox's mark among it).
func (s *sandbox) turnAgentEnv(ta *turnAgent, srv modelEndpoint) (agentsetup.Agent, map[string]string) {
	s.t.Helper()
	a, err := agentsetup.Setup(ta.name, nodeModules, s.home, srv.URL())
	if err != nil {
		s.t.Fatal(err)
	}
	if ta.adjust != nil {
		ta.adjust(&a)
	}
	keyed, _ := srv.(keyedEndpoint)
	if keyed != nil {
		s.replaceUnderHome(dummyKey, keyed.AgentKey())
	}
	env := map[string]string{markVar: s.mark}
	for _, kv := range a.Env {
		k, v, _ := strings.Cut(kv, "=")
		if keyed != nil && strings.Contains(v, dummyKey) {
			v = keyed.AgentKey()
		}
		env[k] = v
	}
	return a, env
}

// replaceUnderHome replaces old with new in every file agentsetup wrote
// under the sandbox's HOME (opencode's provider config holds its key).
func (s *sandbox) replaceUnderHome(old, new string) {
	s.t.Helper()
	err := filepath.WalkDir(s.home, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), old) {
			return err
		}
		return os.WriteFile(path, []byte(strings.ReplaceAll(string(b), old, new)), 0o600)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// writeWorkflowFile writes wf as the sandbox's workflow file and returns
// its path.
func (s *sandbox) writeWorkflowFile(wf string) string {
	s.t.Helper()
	path := filepath.Join(s.dir, "wf.yaml")
	if err := os.WriteFile(path, []byte(wf), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// needTurnAgent returns the registered agent or fails.
func needTurnAgent(t *testing.T, name string) *turnAgent {
	t.Helper()
	ta := turnAgents[name]
	if ta == nil {
		t.Fatalf("no turn agent %q registered", name)
	}
	return ta
}
