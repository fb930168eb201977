package main

// End to end: sandbox: {network: gateway} (issue 37, SPEC §10 "Model
// gateway") where there is no gateway to reach. A shell step never has
// one: validate and run refuse it at the value, exit 2. An agent has one
// only with gateway:; without, its step fails before the agent starts.
// (The agent that reaches its gateway is tested in steps/confine and
// internal/sandbox, until gateway: is wired into the step.)

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNetworkGatewayWithoutAGatewayIsRefused(t *testing.T) {
	skipWithoutSandbox(t)
	ws := t.TempDir()
	for _, tt := range []struct{ name, body, at, says string }{
		{"a shell step's own sandbox", "steps:\n  - id: s\n    run: 'true'\n    sandbox: {network: gateway}\n", "wf.yaml:5:", "a shell step has no model gateway"},
		{"a shell step's with.sandbox", "steps:\n  - id: s\n    uses: shell\n    with: {run: 'true', sandbox: {network: gateway}}\n", "wf.yaml:5:", "a shell step has no model gateway"},
		{"the workflow's sandbox over a shell step", "sandbox: {network: gateway}\nsteps:\n  - id: s\n    run: 'true'\n", "wf.yaml:4:", "give this step its own sandbox:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wf := writeWorkflow(t, t.TempDir(), "name: gw\n"+tt.body)
			for _, cmd := range [][]string{{"validate", wf}, {"run", wf, "--workspace", ws}} {
				r := acpflowEnv(t, ws, nil, nil, cmd...)
				if r.code != 2 || !strings.Contains(r.stderr, tt.at) || !strings.Contains(r.stderr, tt.says) {
					t.Errorf("%s: exit %d\n%s\nwant 2, at %s, saying %q", cmd[0], r.code, r.stderr, tt.at, tt.says)
				}
			}
		})
	}
	t.Run("an agent without gateway:", func(t *testing.T) {
		record := filepath.Join(t.TempDir(), "record.jsonl")
		body := fmt.Sprintf("name: gw\nagents:\n  a: {command: %s, args: %s, sandbox: {network: gateway}}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: hi}\n",
			testAgent, agentArgs("-record", record))
		r, st := runConfined(t, t.TempDir(), ws, body, nil)
		s := st["s"]
		if r.code != 1 || s.Status != "failed" || !strings.Contains(s.Error, "agent a: sandbox: network: gateway") || !strings.Contains(s.Error, "only an agent with gateway: has one") {
			t.Errorf("exit %d, step %s: %s\nwant 1 and a failed step saying the agent has no gateway", r.code, s.Status, s.Error)
		}
		if _, err := os.Stat(record); err == nil {
			t.Error("the agent was started")
		}
	})
}
