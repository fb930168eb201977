package workflows_test

import (
	"strings"
	"testing"

	_ "github.com/acpflow/acpflow/steps/shell"
	"github.com/acpflow/acpflow/workflows"
)

// TestRunIsTheShorthandOfUsesShell: `run:` with shell:, env: and cwd:
// beside it is a shell step whose with: holds those keys, as `uses: shell`
// with them under with: is.
func TestRunIsTheShorthandOfUsesShell(t *testing.T) {
	wf, err := workflows.Parse("t.yaml", []byte(`
name: t
agents: {demo: {builtin: demo}}
steps:
  - id: review
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
  - id: test
    needs: review
    run: go test ./... # ${{ steps.review.output }}
    shell: sh
    env: {REVIEW: "${{ steps.review.output }}", N: 3}
    cwd: sub
    timeout: 5m
    retries: 1
  - id: long
    uses: shell
    with: {run: make, shell: bash}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"test", "long"} {
		st := wf.Step(id)
		if st.Uses != "shell" || st.Run == nil {
			t.Errorf("step %s: uses %q, prepared %v; want a prepared shell step", id, st.Uses, st.Run != nil)
		}
	}
	with := wf.Step("test").With
	for _, k := range []string{"run", "shell", "env", "cwd"} {
		if _, ok := with[k]; !ok {
			t.Errorf("step test: with has no %s: %v", k, with)
		}
	}
	if wf.Step("test").Retries != 1 || wf.Step("test").Timeout.Minutes() != 5 {
		t.Errorf("step test: the engine's keys beside run: were not read: %+v", wf.Step("test"))
	}
}

// TestRunErrorsSayWhereAndWhat: every mistake with run: is reported at
// the key or value at fault, with the line and column.
func TestRunErrorsSayWhereAndWhat(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		want       []string
	}{
		{"run and uses", "    run: make\n    uses: acp-subagent\n", []string{`t.yaml:6:5: step "a": run: and uses: together: a step either runs a command line`}},
		{"run and uses shell", "    run: make\n    uses: shell\n", []string{`t.yaml:6:5: step "a": run: and uses: together: run: is the shorthand of uses: shell`}},
		{"run and with", "    run: make\n    with: {run: make}\n", []string{`t.yaml:6:5: step "a": with: goes with uses:; beside run:, write shell, env, cwd, sandbox, output-schema on the step itself`}},
		{"shell without run", "    uses: shell\n    with: {run: make}\n    shell: sh\n", []string{`t.yaml:7:5: step "a": shell: goes with run:`}},
		{"env without run", "    uses: shell\n    with: {run: make}\n    env: {A: b}\n", []string{`t.yaml:7:5: step "a": env: goes with run:`}},
		{"run not a string", "    run: [make]\n", []string{`t.yaml:5:10: step "a": run: want a command line (a string), got a list`}},
		{"run empty", "    run: \"  \"\n", []string{`t.yaml:5:10: step "a": run is empty`}},
		{"unknown shell", "    run: make\n    shell: node\n", []string{`t.yaml:6:12: step "a": shell: unknown shell "node"`, `"node {0}"`}},
		{"custom shell twice {0}", "    run: make\n    shell: perl {0} {0}\n", []string{`t.yaml:6:12: step "a": shell: "perl {0} {0}" has {0} 2 times`}},
		{"env value a list", "    run: make\n    env:\n      A: [1]\n", []string{`t.yaml:7:10: step "a": env.A: want a string, number or boolean, got a list`}},
		{"env not a mapping", "    run: make\n    env: A=1\n", []string{`t.yaml:6:10: step "a": env must be a mapping`}},
		{"cwd empty", "    run: make\n    cwd: \"\"\n", []string{`t.yaml:6:10: step "a": cwd: want a directory`}},
		{"with key unknown", "    uses: shell\n    with: {run: make, working-directory: x}\n", []string{`t.yaml:6:23: step "a": with: unknown key "working-directory" for shell`}},
		{"with without run", "    uses: shell\n    with: {shell: sh}\n", []string{`step "a": with: missing run (shell needs run)`}},
		{"sandbox without run", "    uses: acp-subagent\n    with: {agent: x, prompt: p}\n    sandbox: true\n", []string{`t.yaml:7:5: step "a": sandbox: goes with run:`}},
		{"sandbox key unknown", "    run: make\n    sandbox: {netwrk: off}\n", []string{`t.yaml:6:23: step "a": sandbox: unknown key "netwrk" (known: write, deny, network, required)`}},
		{"sandbox network under with", "    uses: shell\n    with: {run: make, sandbox: {network: sometimes}}\n", []string{`t.yaml:6:42: step "a": sandbox.network: want on, off, gateway or a list of hosts`}},
		{"sandbox a string", "    run: make\n    sandbox: yes please\n", []string{`t.yaml:6:14: step "a": sandbox: want true, false or a mapping`}},
		{"unknown step in run", "    run: echo ${{ steps.nope.output }}\n", []string{`t.yaml:5:`, `nope`}},
		{"unknown step in env", "    run: echo\n    env: {A: \"${{ steps.nope.output }}\"}\n", []string{`t.yaml:6:`, `nope`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: t\nsteps:\n  - id: a\n    # the step\n" + tc.step
			_, err := workflows.Parse("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", src)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
