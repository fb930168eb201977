package main

// End to end: sandbox: {network: gateway} (issue 37, SPEC §10 "Model
// gateway") where there is no gateway to reach. A shell step never has
// one, and an agent only with gateway:: validate and run refuse both at
// the value, exit 2. (The agent that reaches its gateway is
// gateway_e2e_test.go's.)

import (
	"fmt"
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
	// An agent's own sandbox: or the workflow's: refused at the value.
	for _, tt := range []struct{ name, body, at string }{
		{"an agent's own sandbox", "agents:\n  a:\n    command: %s\n    sandbox: {network: gateway}\n", "wf.yaml:5:"},
		{"the workflow's sandbox over an agent", "sandbox: {network: gateway}\nagents:\n  a:\n    command: %s\n", "wf.yaml:2:"},
	} {
		t.Run(tt.name+" without gateway:", func(t *testing.T) {
			wf := writeWorkflow(t, t.TempDir(), "name: gw\n"+fmt.Sprintf(tt.body, testAgent)+"steps:\n  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}\n")
			for _, cmd := range [][]string{{"validate", wf}, {"run", wf, "--workspace", ws}} {
				r := acpflowEnv(t, ws, nil, nil, cmd...)
				if r.code != 2 || !strings.Contains(r.stderr, tt.at) || !strings.Contains(r.stderr, "agent a: sandbox network: gateway") {
					t.Errorf("%s: exit %d\n%s\nwant 2, at %s, saying the agent has no gateway", cmd[0], r.code, r.stderr, tt.at)
				}
			}
		})
	}
}
