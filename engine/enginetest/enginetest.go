// Package enginetest is the scheduling conformance suite: every case of
// how a run is scheduled (needs, if:, for-each, max-parallel, retries, a
// failure stopping the run, continue-on-error, outputs), on the fake step
// kind, for any backend that drives engine.Schedule. engine's tests run it
// on the CLI's driver (engine.Run), temporal/flow's on the Temporal
// interpreter: the two must schedule a workflow alike.
package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps/steptest"
)

// Driver loads the workflow file at path (with no inputs given: every
// case's inputs have defaults) and runs it to its end, as its backend
// does, under run id runID (the fake kind's trace is kept by it), and
// returns the run's result. Loading is the driver's: the suite sits below
// the workflow loader.
type Driver func(t *testing.T, runID, path string) *engine.RunResult

// Case is one workflow of fake steps and what must come of it.
type Case struct {
	Name     string
	Workflow string // YAML; every step uses: fake
	// Check looks at the result and at the fake steps' trace.
	Check func(t *testing.T, res *engine.RunResult, tr steptest.Trace)
}

// runs numbers the suite's runs, so that a run id is new under -count=N
// too (the fake kind's trace is kept by run id for the binary's life).
var runs atomic.Int64

// Run runs every case with drive; kind is the fake kind the test binary
// registered (steps.Register).
func Run(t *testing.T, kind *steptest.Fake, drive Driver) {
	for i, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "wf.yaml")
			if err := os.WriteFile(path, []byte(c.Workflow), 0o644); err != nil {
				t.Fatal(err)
			}
			runID := fmt.Sprintf("conformance-%d-%d-%s", i, runs.Add(1), t.Name())
			res := drive(t, runID, path)
			c.Check(t, res, kind.Trace(runID))
		})
	}
}

// Statuses is "id=status" for each step, in file order of the ids given.
func Statuses(res *engine.RunResult, ids ...string) string {
	var b []string
	for _, id := range ids {
		st := "missing"
		if s := res.Steps[id]; s != nil {
			st = string(s.Status)
		}
		b = append(b, id+"="+st)
	}
	return strings.Join(b, " ")
}

func want(t *testing.T, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// Cases are the scheduling cases.
var Cases = []Case{
	{
		Name: "needs order a diamond and feed outputs",
		Workflow: `
name: diamond
max-parallel: 4
steps:
  - {id: d, needs: [b, c], uses: fake, with: {output: "${{ steps.b.output }}+${{ steps.c.output }}"}}
  - {id: b, needs: [a], uses: fake, with: {output: "${{ steps.a.output }}b", sleep: 30ms}}
  - {id: c, needs: [a], uses: fake, with: {output: "${{ steps.a.output }}c"}}
  - {id: a, uses: fake, with: {output: a}}
outputs:
  d: ${{ steps.d.output }}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "outputs.d", res.Outputs["d"], "ab+ac")
			if len(tr.Started) != 4 || tr.Started[0] != "a" || tr.Started[3] != "d" {
				t.Errorf("started %v, want a first and d last", tr.Started)
			}
		},
	},
	{
		Name: "max-parallel bounds the steps at once",
		Workflow: `
name: wide
max-parallel: 2
steps:
  - {id: s1, uses: fake, with: {wait-for-peak: 2}}
  - {id: s2, uses: fake, with: {wait-for-peak: 2}}
  - {id: s3, uses: fake, with: {wait-for-peak: 2}}
  - {id: s4, uses: fake, with: {wait-for-peak: 2}}
`,
		// Each turn waits until two have run at once: the overlap is an
		// event, not a sleep a loaded machine could outlast.
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			if tr.Peak != 2 {
				t.Errorf("%d steps at once, want max-parallel's 2", tr.Peak)
			}
		},
	},
	{
		Name: "if false skips and its dependants are skipped",
		Workflow: `
name: guard
max-parallel: 4
steps:
  - {id: a, uses: fake, with: {output: "no"}}
  - {id: b, needs: [a], if: 'steps.a.output == "yes"', uses: fake}
  - {id: c, needs: [b], uses: fake}
  - {id: d, needs: [a], if: 'steps.a.output == "no"', uses: fake}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "steps", Statuses(res, "a", "b", "c", "d"), "a=succeeded b=skipped c=skipped d=succeeded")
			want(t, "b's reason", res.Steps["b"].Error, `if: steps.a.output == "yes" is false`)
			want(t, "c's reason", res.Steps["c"].Error, "needs b, which was skipped")
		},
	},
	{
		Name: "retries until an attempt succeeds",
		Workflow: `
name: retry
steps:
  - {id: a, uses: fake, retries: 3, with: {fail-attempts: 2, output: third}}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "attempts", res.Steps["a"].Attempts, 3)
			want(t, "output", res.Steps["a"].Output, "third")
		},
	},
	{
		Name: "a failure past its retries cancels the rest and skips what has not started",
		Workflow: `
name: fail
max-parallel: 4
steps:
  - {id: bad, uses: fake, retries: 1, with: {fail: true}}
  - {id: slow, uses: fake, with: {wait-for-cancel: true}}
  - {id: after, needs: [bad], uses: fake}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusFailed)
			want(t, "steps", Statuses(res, "bad", "slow", "after"), "bad=failed slow=cancelled after=skipped")
			want(t, "bad's attempts", res.Steps["bad"].Attempts, 2)
			want(t, "run error", res.Error, "")
			if !strings.Contains(res.Steps["slow"].Error, "another step failed") {
				t.Errorf("slow's error %q, want it cancelled because another step failed", res.Steps["slow"].Error)
			}
		},
	},
	{
		Name: "continue-on-error lets dependants run and the run succeed",
		Workflow: `
name: coe
max-parallel: 4
steps:
  - {id: bad, uses: fake, continue-on-error: true, with: {fail: true}}
  - {id: after, needs: [bad], uses: fake, with: {output: "${{ steps.bad.status }}"}}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "after's output", res.Steps["after"].Output, "failed")
		},
	},
	{
		Name: "for-each runs each element within its max-parallel and lists the outputs in order",
		Workflow: `
name: each
max-parallel: 4
steps:
  - {id: each, uses: fake, for-each: "[3, 1, 2]", max-parallel: 2, with: {output: "n${{ item }}-${{ index }}", sleep: 20ms}}
  - {id: after, needs: [each], uses: fake, with: {output: "${{ steps.each.output }}"}}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "each's output", res.Steps["each"].Output, "[n3-0 n1-1 n2-2]")
			want(t, "after's output", res.Steps["after"].Output, `["n3-0","n1-1","n2-2"]`)
			if slices.Index(tr.Started, "after") != 3 {
				t.Errorf("started %v: after must start once every element is done", tr.Started)
			}
			if tr.Peak > 2 {
				t.Errorf("%d elements at once, want at most the for-each's max-parallel 2", tr.Peak)
			}
		},
	},
	{
		Name: "a for-each element that fails fails the step and names the element",
		Workflow: `
name: eachfail
max-parallel: 4
steps:
  - {id: each, uses: fake, for-each: "[1, 2]", with: {fail: true}}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusFailed)
			if !strings.HasPrefix(res.Steps["each"].Error, "item 0: ") {
				t.Errorf("each's error %q, want it to name item 0", res.Steps["each"].Error)
			}
		},
	},
	{
		// SPEC §8: a step settles at its turn's end (turn_end), before its
		// agent is torn down. a's teardown lasts until b has started (or
		// 20s, which fails): a backend that settles a only once a is gone
		// shows "gone a" before "start b".
		Name: "a dependant starts while its need's agent is still tearing down",
		Workflow: `
name: turnend
max-parallel: 2
steps:
  - {id: a, uses: fake, with: {output: a, teardown: 20s, teardown-until: b}}
  - {id: b, needs: [a], uses: fake, with: {output: "${{ steps.a.output }}b"}}
outputs:
  b: ${{ steps.b.output }}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "outputs.b", res.Outputs["b"], "ab")
			if slices.Index(tr.Log, "start b") > slices.Index(tr.Log, "gone a") {
				t.Errorf("log %v: b must start while a's agent is still tearing down", tr.Log)
			}
		},
	},
	{
		// The other half of the same rule: the step's run slot is held
		// until its agent is gone, so with max-parallel 1 b starts only
		// after a's teardown (which ends by itself after 50ms).
		Name: "a step's slot stays held until its agent is gone",
		Workflow: `
name: slotheld
max-parallel: 1
steps:
  - {id: a, uses: fake, with: {output: a, teardown: 50ms}}
  - {id: b, uses: fake, with: {output: b}}
`,
		Check: func(t *testing.T, res *engine.RunResult, tr steptest.Trace) {
			want(t, "status", res.Status, engine.StatusSucceeded)
			want(t, "log", tr.Log, []string{"start a", "end a", "gone a", "start b", "end b"})
		},
	},
}
