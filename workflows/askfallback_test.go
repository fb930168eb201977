package workflows

import (
	"context"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/policies"
)

// An ask-fallback may stand beside permission: (the only place for the
// shorthand `permission: ask`) or inside its mapping, in one of them.
func TestAskFallbackBesidePermissionFallsBackForIt(t *testing.T) {
	wf, err := Parse("wf.yaml", []byte(`name: ask
agents:
  demo: {builtin: demo}
policies:
  permission: ask
  ask-fallback: allow
steps:
  - id: s
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
    policies: {permission: {rules: [{if: "true", then: ask}]}, ask-fallback: cancel}
`))
	if err != nil {
		t.Fatal(err)
	}
	req := &policies.PermissionRequest{Options: []policies.Option{{ID: "y", Kind: "allow_once"}, {ID: "n", Kind: "reject_once"}}}
	if rec := policies.Answer(context.Background(), wf.Policies.Permission, policies.SourceWorkflow, req); rec.Decision != policies.Allow || rec.Ask != "fallback" {
		t.Errorf("the workflow's ask: %+v, want its fallback's allow", rec)
	}
	if rec := policies.Answer(context.Background(), wf.Steps[0].Policies.Permission, policies.SourceStep, req); rec.Decision != policies.Cancel || rec.Ask != "fallback" {
		t.Errorf("the step's ask: %+v, want its fallback's cancel", rec)
	}
}

func TestAskFallbackMistakesArePlaced(t *testing.T) {
	for want, policiesYAML := range map[string]string{
		`wf.yaml:6:17: ask-fallback: want one of allow, allow_always, reject, reject_always, cancel; got "ask"`: "  permission: ask\n  ask-fallback: ask\n",
		`wf.yaml:6:17: ask-fallback goes with the permission: it applies to`:                                    "  env: {inherit: all}\n  ask-fallback: allow\n",
		`wf.yaml:6:17: ask-fallback is set twice: here and under permission:`:                                   "  permission: {default: ask, ask-fallback: reject}\n  ask-fallback: allow\n",
		`wf.yaml:6:16: ask-timeout: want a duration such as "2s" or "500ms"; got "soon"`:                        "  permission: ask\n  ask-timeout: soon\n",
		`wf.yaml:6:16: ask-timeout is set twice: here and under permission:`:                                    "  permission: {default: ask, ask-timeout: 1m}\n  ask-timeout: 2m\n",
	} {
		_, err := Parse("wf.yaml", []byte("name: ask\nagents:\n  demo: {builtin: demo}\npolicies:\n"+policiesYAML+
			"steps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", policiesYAML, err, want)
		}
	}
}

func TestApprovalsMistakesArePlaced(t *testing.T) {
	for want, yaml := range map[string]string{
		`wf.yaml:5:12: approvals.webhook: "http://hooks.example/x": plain http is allowed to a loopback address only`: "approvals:\n  webhook: http://hooks.example/x\n  secret: ${{ env.S }}\n",
		`wf.yaml:5:3: approvals: secret: is missing`:                                                                  "approvals:\n  webhook: https://hooks.example/x\n",
		`the one expression allowed here is ${{ env.NAME }}`:                                                          "approvals:\n  webhook: https://hooks.example/x\n  secret: ${{ inputs.s }}\n",
		`wf.yaml:5:3: approvals: unknown key "webhok"`:                                                                "approvals:\n  webhok: https://hooks.example/x\n",
	} {
		_, err := Parse("wf.yaml", []byte("name: ask\nagents:\n  demo: {builtin: demo}\n"+yaml+
			"steps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", yaml, err, want)
		}
	}
	wf, err := Parse("wf.yaml", []byte("name: ask\nagents:\n  demo: {builtin: demo}\napprovals:\n  webhook: https://hooks.example/x\n  secret: ${{ env.HOOK }}\n"+
		"steps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"))
	if err != nil || wf.Approvals == nil || wf.Approvals.SecretEnv != "HOOK" || wf.Approvals.Secret != "" {
		t.Errorf("approvals %+v, %v: want the secret read from $HOOK at run time", wf.Approvals, err)
	}
}
