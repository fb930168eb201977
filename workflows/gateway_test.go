package workflows_test

import (
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// gatewayFile is a workflow with agents (YAML under agents:) and a
// workflow-level top (YAML before agents:).
func gatewayFile(top, agents string) string {
	return "name: t\n" + top + "agents:\n" + agents +
		"steps:\n  - {id: a, uses: acp-subagent, with: {agent: a, prompt: hi}}\n"
}

func TestGatewayIsReadOnAgentsAndAsTheWorkflowsDefault(t *testing.T) {
	wf, err := workflows.Parse("t.yaml", []byte(gatewayFile("gateway: true\n",
		"  a: {preset: claude}\n"+
			"  b:\n    preset: goose\n    gateway: {api: openai, base-url-env: OPENAI_BASE_URL, key-env: OPENAI_API_KEY, key: \"${{ env.K }}\", upstream: \"http://127.0.0.1:9\", record: true, retry: 3, prices: {m: {input: 1, output: 2.5}}}\n"+
			"  c: {preset: codex, gateway: false}\n"+
			"  d: {builtin: demo}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if g := wf.Agents["a"].Gateway; g == nil || g.Key != "" || g.Upstream != "" {
		t.Errorf("a's gateway = %+v, want the workflow's gateway: true", g)
	}
	g := wf.Agents["b"].Gateway
	if g == nil || g.API != "openai" || g.Key != "${{ env.K }}" || !g.Record || g.Retry != 3 || g.Prices["m"].Output != 2.5 {
		t.Errorf("b's gateway = %+v", g)
	}
	if wf.Agents["c"].Gateway != nil || wf.Agents["d"].Gateway != nil {
		t.Errorf("gateway: false and a builtin got the workflow's gateway")
	}
}

func TestAGatewayThatCannotWorkIsAnErrorAtItsPlace(t *testing.T) {
	for _, tc := range []struct {
		name, top, agents, at, says string
	}{
		{"an unknown key", "", "  a:\n    preset: claude\n    gateway: {keys: x}\n", "t.yaml:5:15:", `unknown key "keys"`},
		{"a key in clear http to another host", "", "  a:\n    preset: claude\n    gateway: {upstream: \"http://example.com\"}\n", "t.yaml:5:25:", "plain http is allowed to a loopback address only"},
		{"an upstream that is no URL", "", "  a:\n    preset: claude\n    gateway: {upstream: api.anthropic.com}\n", "t.yaml:5:25:", "is not an http(s) URL"},
		{"an agent no preset wires", "", "  a:\n    command: my-agent\n    gateway: true\n", "t.yaml:5:14:", "set api (anthropic, openai or gemini), base-url-env"},
		{"goose", "", "  a:\n    preset: goose\n    gateway: {api: openai}\n", "t.yaml:5:14:", "preset goose does not say how its agent is pointed at a gateway; set base-url-env"},
		{"goose under the workflow's default", "gateway: true\n", "  a: {preset: goose}\n", "t.yaml:2:10:", `agent "a": gateway: preset goose`},
		{"a builtin", "", "  a:\n    builtin: demo\n    gateway: true\n", "t.yaml:5:14:", "builtin agents call no model"},
		{"an api no gateway speaks", "", "  a:\n    preset: claude\n    gateway: {api: mistral}\n", "t.yaml:5:20:", `"mistral" is not one of anthropic, openai, gemini`},
		{"a negative price", "", "  a:\n    preset: claude\n    gateway: {prices: {m: {input: -1}}}\n", "t.yaml:5:35:", "want a price from 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workflows.Parse("t.yaml", []byte(gatewayFile(tc.top, tc.agents)))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.at) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q, want at %s saying %q", err, tc.at, tc.says)
			}
		})
	}
}
