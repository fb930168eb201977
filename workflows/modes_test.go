package workflows_test

import (
	"strings"
	"testing"

	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	"github.com/acpflow/acpflow/workflows"
)

// A mode in which the agent decides alone, named in the file, is refused
// unless the policy is allow: the class is "a mode that the preset lists
// or that agents in general name so, set on the agent or on a step, under
// any permission policy (shorthand, rules, the default) but allow".
func TestAModeThatDecidesAloneIsInvalidUnderAnyPolicyButAllow(t *testing.T) {
	for _, tt := range []struct {
		name, agentMode, stepMode, policies, wantErr string
	}{
		{"claude's auto under reject", "mode: auto", "", "permission: reject", `mode "auto" lets agent "a" run commands`},
		{"claude's auto under the default policy", "mode: auto", "", "", `mode "auto"`},
		{"bypassPermissions on a step under rules", "", "bypassPermissions", "permission: {rules: [{if: 'true', then: allow}]}", `mode "bypassPermissions"`},
		{"codex's agent mode under reject", "", "agent", "permission: reject", `mode "agent"`},
		{"gemini-style yolo on an agent of any preset", "mode: yolo", "", "permission: cancel", `mode "yolo"`},
		{"auto under allow", "mode: auto", "", "permission: allow", ""},
		{"auto under allow_always", "mode: auto", "", "permission: allow_always", ""},
		{"a mode that asks under reject", "mode: default", "", "permission: reject", ""},
		{"plan under reject", "mode: plan", "", "permission: reject", ""},
		{"a templated mode is left to the run", "", "${{ inputs.m }}", "permission: reject", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			preset := "claude"
			if strings.Contains(tt.name, "codex") {
				preset = "codex"
			}
			agent := "{preset: " + preset + "}"
			if tt.agentMode != "" {
				agent = "{preset: " + preset + ", " + tt.agentMode + "}"
			}
			src := "name: t\ninputs: {m: {type: string, default: x}}\nagents:\n  a: " + agent
			if tt.policies != "" {
				src += "\npolicies: {" + tt.policies + "}"
			}
			src += "\nsteps:\n  - id: s\n    uses: acp-subagent\n    with:\n      agent: a\n      prompt: hi\n"
			if tt.stepMode != "" {
				src += "      mode: \"" + tt.stepMode + "\"\n"
			}
			_, err := workflows.Parse("wf.yaml", []byte(src))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want valid, got %v\n%s", err, src)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("want an error containing %q, got none\n%s", tt.wantErr, src)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q lacks %q", err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), "wf.yaml:"):
				t.Errorf("error %q does not say where", err)
			}
		})
	}
}
