package workflows_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/workflows"
)

const full = `
name: review
description: Plan, then review.
max-parallel: 4
inputs:
  task: {type: string, required: true, description: What to do}
  depth: {type: number, default: 2}
  flags: {type: object, default: {fast: true, n: 3}}
agents:
  base: &base
    builtin: demo
  demo:
    <<: *base
    start-timeout: 90
  codex:
    preset: codex
    auth: codex-api-key
    env: {CODEX_API_KEY: "${{ env.CODEX_API_KEY }}", PORT: 8080}
    cwd: sub/dir
    start-timeout: 1h30m
    dispose: {eof-grace: 6s, term-grace: "3"}
policies:
  permission: reject
  env: {inherit: core}
steps:
  - id: plan
    uses: acp-subagent
    with:
      agent: codex
      prompt: |
        Plan this: ${{ inputs.task }} at depth ${{ inputs.depth }}
      env: {PLAN_MODE: "1", LEVEL: 3, NESTED: ["${{ inputs.task }}", true]}
    timeout: 10m
    retries: 2
    continue-on-error: true
    policies:
      permission: allow
      env: {inherit: none, scrub-credentials: false}
  - id: review
    name: Review the plan
    needs: [plan]
    if: ${{ steps.plan.stop_reason == "completed" }}
    uses: acp-subagent
    for-each: '["a", "b"]'
    max-parallel: 2
    with:
      agent: demo
      prompt: "Review ${{ item }} (${{ index }}): ${{ steps.plan.output }}"
outputs:
  plan: ${{ steps.plan.output }}
  count: 3
`

// fullWorkflow parses full, which sets every key (an agent through a merge
// key, as users share settings between agents).
func fullWorkflow(t *testing.T) *engine.Workflow {
	t.Helper()
	src := full
	wf, err := workflows.Parse("full.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(src))
	if wf.Hash != hex.EncodeToString(sum[:]) || wf.File != "full.yaml" {
		t.Errorf("File, Hash = %q, %q", wf.File, wf.Hash)
	}
	return wf
}

func TestParseReadsEveryKey(t *testing.T) {
	wf := fullWorkflow(t)
	if wf.Name != "review" || wf.Description != "Plan, then review." || wf.MaxParallel != 4 {
		t.Errorf("name, description, max-parallel = %q, %q, %d", wf.Name, wf.Description, wf.MaxParallel)
	}

	wantInputs := []engine.Input{
		{Name: "task", Type: "string", Required: true, Description: "What to do"},
		{Name: "depth", Type: "number", Default: 2.0, HasDefault: true},
		{Name: "flags", Type: "object", Default: map[string]any{"fast": true, "n": 3.0}, HasDefault: true},
	}
	for i, want := range wantInputs {
		if got := *wf.Inputs[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("input %d = %+v, want %+v", i, got, want)
		}
	}

	demo := wf.Agents["demo"]
	if demo.Builtin != "demo" || demo.StartTimeout != 90*time.Second || demo.EOFGrace != 6*time.Second {
		t.Errorf("demo agent = %+v", demo)
	}
	codex := wf.Agents["codex"]
	if p, _ := acpagent.LookupPreset("codex"); codex.Command != "npx" || !reflect.DeepEqual(codex.Args, p.Argv()) || codex.Args[1] != "@agentclientprotocol/codex-acp" {
		t.Errorf("codex preset gave command %q args %q", codex.Command, codex.Args)
	}
	if codex.Env["CODEX_API_KEY"] != "${{ env.CODEX_API_KEY }}" || codex.Env["PORT"] != "8080" {
		t.Errorf("codex env = %v, want raw templates and numbers as text", codex.Env)
	}
	if codex.Cwd != "sub/dir" || !codex.CwdSet || codex.Auth != "codex-api-key" {
		t.Errorf("codex cwd, auth = %q %v %q", codex.Cwd, codex.CwdSet, codex.Auth)
	}
	if codex.StartTimeout != 90*time.Minute || codex.EOFGrace != 6*time.Second || codex.TermGrace != 3*time.Second {
		t.Errorf("codex timings = %v %v %v", codex.StartTimeout, codex.EOFGrace, codex.TermGrace)
	}

	if wf.Policies.Permission != (policies.Shorthand{Decision: policies.Reject}) {
		t.Errorf("workflow permission = %#v", wf.Policies.Permission)
	}
	if env, ok := wf.Policies.Env.(*policies.EnvRules); !ok || env.Inherit != "core" || !env.ScrubCredentials {
		t.Errorf("workflow env = %#v, want inherit core with credentials scrubbed", wf.Policies.Env)
	}

	plan, review := wf.Steps[0], wf.Steps[1]
	if plan.ID != "plan" || plan.Uses != "acp-subagent" || plan.Run == nil {
		t.Errorf("plan = %+v", plan)
	}
	if plan.Timeout != 10*time.Minute || plan.Retries != 2 || !plan.ContinueOnError {
		t.Errorf("plan timeout, retries, continue-on-error = %v %d %v", plan.Timeout, plan.Retries, plan.ContinueOnError)
	}
	if plan.Policies.Permission != (policies.Shorthand{Decision: policies.Allow}) {
		t.Errorf("plan permission = %#v", plan.Policies.Permission)
	}
	if env, ok := plan.Policies.Env.(*policies.EnvRules); !ok || env.Inherit != "none" || env.ScrubCredentials {
		t.Errorf("plan env = %#v", plan.Policies.Env)
	}
	if !reflect.DeepEqual(review.Needs, []string{"plan"}) || review.If == nil || review.ForEach == nil || review.ForEachMaxParallel != 2 {
		t.Errorf("review = %+v", review)
	}

	if len(wf.Outputs) != 2 || wf.Outputs[0].Name != "plan" || wf.Outputs[1].Value.Source != "3" {
		t.Errorf("outputs = %+v", wf.Outputs)
	}
}

func TestWithKeepsItsShapeWithEveryStringCompiled(t *testing.T) {
	plan := fullWorkflow(t).Steps[0]
	scope := &engine.Scope{Inputs: map[string]any{"task": "ship it", "depth": 2.0}}
	prompt, ok := plan.With["prompt"].(*engine.Template)
	if !ok {
		t.Fatalf("with.prompt is a %T, want *engine.Template", plan.With["prompt"])
	}
	if got, err := prompt.Render(scope); err != nil || got != "Plan this: ship it at depth 2\n" {
		t.Errorf("prompt renders %q, %v", got, err)
	}
	env := plan.With["env"].(map[string]any)
	if _, ok := env["PLAN_MODE"].(*engine.Template); !ok {
		t.Errorf("with.env.PLAN_MODE is a %T, want a template", env["PLAN_MODE"])
	}
	if env["LEVEL"] != 3 {
		t.Errorf("with.env.LEVEL = %#v, want the number 3 as is", env["LEVEL"])
	}
	nested := env["NESTED"].([]any)
	if _, ok := nested[0].(*engine.Template); !ok || nested[1] != true {
		t.Errorf("with.env.NESTED = %#v, want a template and true", nested)
	}
}

func TestIfAcceptsTheWrappedForm(t *testing.T) {
	review := fullWorkflow(t).Steps[1]
	if review.If.Source != `steps.plan.stop_reason == "completed"` {
		t.Errorf("if source = %q, want the expression without ${{ }}", review.If.Source)
	}
}

func TestLoadNamesTheFileInErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(path, []byte("name: x\nsteps: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := workflows.Load(path)
	var es workflows.Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].File != path || es[0].Line != 2 || es[0].Col != 8 {
		t.Fatalf("Load error = %#v", err)
	}
	if _, err := workflows.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want an os.ErrNotExist", err)
	}
}

func TestParseAcceptsDurationForms(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        time.Duration
	}{
		{"a Go duration in seconds", "90s", 90 * time.Second},
		{"a Go duration with two units", "1h30m", 90 * time.Minute},
		{"a bare integer as seconds", "45", 45 * time.Second},
		{"a quoted integer as seconds", `"45"`, 45 * time.Second},
		{"milliseconds", "1500ms", 1500 * time.Millisecond},
	} {
		t.Run(tc.name+" is read as "+tc.want.String(), func(t *testing.T) {
			src := "name: t\nagents:\n  demo: {builtin: demo, start-timeout: " + tc.value + "}\n" +
				"steps:\n  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"
			wf, err := workflows.Parse("t.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if got := wf.Agents["demo"].StartTimeout; got != tc.want {
				t.Errorf("start-timeout = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReferencesThatAreAllowed(t *testing.T) {
	for _, tc := range []struct{ name, steps string }{
		{"a step reads a transitive ancestor", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}
  - {id: b, needs: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}
  - {id: c, needs: b, uses: acp-subagent, with: {agent: demo, prompt: "${{ steps.a.output }}"}}`},
		{"a step needs one declared later in the file", `
  - {id: b, needs: a, uses: acp-subagent, with: {agent: demo, prompt: "${{ steps.a.json }}"}}
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}`},
		{"a step reads a step with the bracket form", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}
  - {id: b, needs: a, if: 'steps["a"].status == "succeeded"', uses: acp-subagent, with: {agent: demo, prompt: hi}}`},
		{"a step reads env, run and workflow", `
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: "${{ env.HOME }} ${{ run.id }} ${{ workflow.name }}"}}`},
		{"a for-each step reads item and index", `
  - {id: a, for-each: '[1, 2]', uses: acp-subagent, with: {agent: demo, prompt: "${{ item }} ${{ index }}"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: t\nagents:\n  demo: {builtin: demo}\nsteps:" + tc.steps + "\n"
			if _, err := workflows.Parse("t.yaml", []byte(src)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
