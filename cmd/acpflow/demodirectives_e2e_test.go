package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The demo agent's json: and usage: lines (docs/acp-subagent.md#the-demo-agent) let
// output-schema and budget: be tried offline; these run them through the binary as a user
// would.

func TestTheDemoAgentsJSONLineMeetsOrFailsAnOutputSchema(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: verdicts
agents:
  demo: {builtin: demo}
steps:
  - id: good
    uses: acp-subagent
    with:
      agent: demo
      prompt: |
        Review the change.
        json: {"approved": true, "summary": "looks right"}`+verdictSchemaYAML+`
  - id: bad
    needs: good
    uses: acp-subagent
    with:
      agent: demo
      schema-retries: 0
      prompt: |
        Review the change.
        json: {"approved": "yes", "summary": "fine"}`+verdictSchemaYAML+`
`)
	r := runStructured(t, dir, "run", wf, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (bad fails its schema): %v\n%s", r.code, r.steps, r.stderr)
	}
	good := r.steps["good"]
	if want := map[string]any{"approved": true, "summary": "looks right"}; good["status"] != "succeeded" || !reflect.DeepEqual(good["json"], want) {
		t.Errorf("good %v with json %#v, want succeeded with %#v", good["status"], good["json"], want)
	}
	if good["final"] != `{"approved": true, "summary": "looks right"}` {
		t.Errorf("good's final message = %q, want the json: line's text exactly", good["final"])
	}
	bad := r.steps["bad"]
	want := "the final message does not match with.output-schema: at '/approved': got string, want boolean"
	if bad["status"] != "failed" || !strings.HasPrefix(fmt.Sprint(bad["error"]), want) {
		t.Errorf("bad %v %q, want failed %q", bad["status"], bad["error"], want)
	}
}

func TestTheDemoAgentsUsageLineIsCountedAndStopsARunOverItsBudget(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	const steps = `agents:
  demo: {builtin: demo}
steps:
  - id: spend
    uses: acp-subagent
    with:
      agent: demo
      prompt: |
        Spend a little.
        usage: input=1200 output=300 cost=0.06
  - id: after
    needs: spend
    uses: acp-subagent
    with: {agent: demo, prompt: Spend more.}
`
	t.Run("without a budget the usage is the step's", func(t *testing.T) {
		out := filepath.Join(dir, "free.jsonl")
		wf := writeWorkflow(t, dir, "name: free\n"+steps)
		r := acpflow(t, dir, "run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		res := readUsageResult(t, out)
		got := res.Steps["spend"].Usage
		if got["input_tokens"] != 1200.0 || got["output_tokens"] != 300.0 || got["total_tokens"] != 1500.0 ||
			fmt.Sprint(got["cost"]) != fmt.Sprint(map[string]any{"amount": 0.06, "currency": "USD"}) {
			t.Errorf("spend's usage = %v, want 1200 in, 300 out, 1500 total, 0.06 USD", got)
		}
		if res.Steps["after"].Usage != nil {
			t.Errorf("after has no usage: line, yet its usage is %v", res.Steps["after"].Usage)
		}
	})
	t.Run("a cost budget stops the run", func(t *testing.T) {
		out := filepath.Join(dir, "budgeted.jsonl")
		wf := writeWorkflow(t, dir, "name: budgeted\nbudget: {cost: {amount: 0.05, currency: USD}}\n"+steps)
		r := acpflow(t, dir, "run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1 (budget exceeded)\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		res := readUsageResult(t, out)
		const why = "budget exceeded: 0.06 USD of 0.05 USD"
		if res.Status != "failed" || res.Error != why {
			t.Errorf("run %s %q, want failed %q", res.Status, res.Error, why)
		}
		if st := res.Steps["after"]; st.Status != "skipped" || st.Error != "not started: "+why {
			t.Errorf("after %s %q, want skipped, not started: %s", st.Status, st.Error, why)
		}
	})
}

func TestValidateChecksABarePolicyFile(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "policy.yaml", "permission:\n  rules:\n    - {if: 'tool.kind == \"read\"', then: allow}\n  default: reject\nenv: {inherit: core}\n")
	r := acpflow(t, dir, "validate", good)
	if r.code != 0 || r.stdout != good+": ok (policy file)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q: want 0 and %q", r.code, r.stdout, r.stderr, good+": ok (policy file)\n")
	}

	bad := writeFile(t, dir, "bad-policy.yaml", "permission:\n  rules:\n    - if: tool.kind = \"read\"\n      then: alow\n")
	r = acpflow(t, dir, "validate", bad)
	for _, want := range []string{
		bad + `:3:21: permission.rules[0].if: use == to compare (= is not an operator)`,
		bad + `:4:13: permission.rules[0].then: want one of`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.code != 2 || strings.Contains(r.stdout, "ok") {
		t.Errorf("exit %d, stdout %q: want 2 and no ok", r.code, r.stdout)
	}

	// A file with neither steps nor a policy key is a workflow missing its steps.
	lost := writeFile(t, dir, "lost.yaml", "agents:\n  demo: {builtin: demo}\n")
	r = acpflow(t, dir, "validate", lost)
	if r.code != 2 || !strings.Contains(r.stderr, "missing steps") || strings.Contains(r.stderr, "policy file") {
		t.Errorf("exit %d, stderr %q: want 2 and the workflow's missing steps, not a policy file's errors", r.code, r.stderr)
	}
}

// TestValidateWordsTheNewcomersYAMLMistakes: each mistake is said in acpflow's words at its
// position, without the YAML or expression library's.
func TestValidateWordsTheNewcomersYAMLMistakes(t *testing.T) {
	dir := t.TempDir()
	const head = "name: t\nagents:\n  demo: {builtin: demo}\nsteps:\n"
	for _, tc := range []struct {
		name, body, want, library string
	}{
		{"a tab in the indentation", "  - id: a\n\tuses: acp-subagent\n", ":6:1: a tab indents this line; YAML indents with spaces", "cannot start any token"},
		{"a comment cutting an if", "  - id: a\n    uses: acp-subagent\n    if: env.X == \"a #b\"\n    with: {agent: demo, prompt: hi}\n",
			`:7:21: step "a": if: the expression is cut at " #": YAML starts a comment there; quote the value`, "literal not terminated"},
		{"= for ==", "  - id: a\n    uses: acp-subagent\n    if: env.X = \"a\"\n    with: {agent: demo, prompt: hi}\n",
			`:7:15: step "a": if: expression does not compile: use == to compare (= is not an operator)`, "Operator"},
		{"prompt beside uses", "  - id: a\n    uses: acp-subagent\n    with: {agent: demo}\n    prompt: hi\n",
			`:8:5: step "a": "prompt" belongs under with:`, "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", head+tc.body)
			r := acpflow(t, dir, "validate", file)
			if r.code != 2 || !strings.Contains(r.stderr, file+tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant 2 and %q", r.code, r.stderr, file+tc.want)
			}
			if strings.Contains(r.stderr, tc.library) {
				t.Errorf("the library's wording %q leaks through:\n%s", tc.library, r.stderr)
			}
		})
	}
}
