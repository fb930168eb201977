package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/workflows"
)

// TestRunPolicyEvalAndPolicyTestAgreeOnWhichPolicyDecides covers the class
// "which policy decides this step": a step with its own policies, a step
// that inherits the workflow's, a workflow with none (the defaults), and a
// step that sets one kind only (the other from the level above). What a run
// gives the step (engine.PoliciesOf), what `policy eval --step` answers
// with (loadPolicies) and what `policy test` re-decides under
// (loadWhatIfPolicies) must be the same policy with the same source.
func TestRunPolicyEvalAndPolicyTestAgreeOnWhichPolicyDecides(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withPolicies := write("with.yaml", `name: with
agents:
  demo: {builtin: demo}
policies:
  permission: allow
  env: {inherit: core}
steps:
  - id: own
    uses: acp-subagent
    with: {agent: demo, prompt: a}
    policies:
      permission: reject
      env: {inherit: none}
  - id: inherits
    uses: acp-subagent
    with: {agent: demo, prompt: b}
  - id: half
    uses: acp-subagent
    with: {agent: demo, prompt: c}
    policies:
      env: {inherit: all}
`)
	without := write("without.yaml", `name: without
agents:
  demo: {builtin: demo}
steps:
  - id: bare
    uses: acp-subagent
    with: {agent: demo, prompt: a}
  - id: half
    uses: acp-subagent
    with: {agent: demo, prompt: b}
    policies:
      permission: allow
`)
	tests := []struct {
		name, file, step string
		perm, env        policies.Source
	}{
		{"a step's own policies decide it", withPolicies, "own", policies.SourceStep, policies.SourceStep},
		{"a step without policies gets the workflow's", withPolicies, "inherits", policies.SourceWorkflow, policies.SourceWorkflow},
		{"a step that sets env only gets the workflow's permission policy", withPolicies, "half", policies.SourceWorkflow, policies.SourceStep},
		{"a workflow without policies gets the defaults", without, "bare", policies.SourceDefault, policies.SourceDefault},
		{"a step's own permission policy over the defaults", without, "half", policies.SourceStep, policies.SourceDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wf, err := workflows.Load(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			run := engine.PoliciesOf(wf, findStep(wf, tt.step))
			if run.PermissionSource != tt.perm || run.EnvSource != tt.env {
				t.Fatalf("a run: permission from %s, env from %s; want %s, %s", run.PermissionSource, run.EnvSource, tt.perm, tt.env)
			}
			eval, err := loadPolicies(tt.file, tt.step)
			if err != nil {
				t.Fatal(err)
			}
			if eval.PermissionSource != run.PermissionSource || eval.EnvSource != run.EnvSource {
				t.Errorf("policy eval: permission from %s, env from %s; a run: %s, %s", eval.PermissionSource, eval.EnvSource, run.PermissionSource, run.EnvSource)
			}
			if !samePolicy(eval.Permission, run.Permission) || !samePolicy(eval.Env, run.Env) {
				t.Errorf("policy eval decides with other policies than a run")
			}
			// policy test takes a step's own policy from Steps/EnvSteps,
			// else the workflow-level one.
			test, err := loadWhatIfPolicies(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			perm, permSrc := test.Permission, test.Source
			if p, ok := test.Steps[tt.step]; ok {
				perm, permSrc = p, policies.SourceStep
			}
			env, envSrc := test.Env, test.EnvSource
			if e, ok := test.EnvSteps[tt.step]; ok {
				env, envSrc = e, policies.SourceStep
			}
			if permSrc != run.PermissionSource || envSrc != run.EnvSource {
				t.Errorf("policy test: permission from %s, env from %s; a run: %s, %s", permSrc, envSrc, run.PermissionSource, run.EnvSource)
			}
			if !samePolicy(perm, run.Permission) || !samePolicy(env, run.Env) {
				t.Errorf("policy test decides with other policies than a run")
			}
		})
	}
}

// samePolicy: the very value a level configured, or equal defaults (made
// afresh on each call).
func samePolicy(a, b any) bool { return reflect.DeepEqual(a, b) }
