package engine_test

// Scheduler tests run workflows of in-process fake steps
// (steps/steptest): what they check is the engine's order, bounds and
// propagation, not processes, so they need no agent.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/steptest"
	"github.com/acpflow/acpflow/workflows"
)

// fake is the fake kind, registered as a kind's init would register it.
var fake = steptest.NewFake()

func init() { steps.Register(fake) }

// runFake parses and runs a workflow of fake steps under ctx, returning its
// result and the trace of what its steps did.
func runFake(t *testing.T, ctx context.Context, yaml string) (*engine.RunResult, steptest.Trace) {
	t.Helper()
	wf, err := workflows.Parse("wf.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := workflows.ResolveInputs(wf, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := engine.Run(ctx, wf, engine.Options{
		Workspace: t.TempDir(), Inputs: inputs, RetryBackoff: time.Millisecond, Events: &sink{},
	})
	return res, fake.Trace(res.RunID)
}

func TestSchedulerRunsStepsInNeedsOrder(t *testing.T) {
	res, tr := runFake(t, context.Background(), `
name: diamond
steps:
  - {id: d, needs: [b, c], uses: fake, with: {output: "${{ steps.b.output }}+${{ steps.c.output }}"}}
  - {id: b, needs: a, uses: fake, with: {output: "${{ steps.a.output }}b", sleep: 20ms}}
  - {id: c, needs: a, uses: fake, with: {output: "${{ steps.a.output }}c"}}
  - {id: a, uses: fake, with: {output: a, sleep: 20ms}}
`)
	if fmt.Sprint(res.Status) != "succeeded" {
		t.Fatalf("run %s: %s", res.Status, statuses(res))
	}
	// The order of events, not of sleeps: b and c start once a has ended,
	// d once both have (which of b and c ends first is the machine's).
	at := func(e string) int { return slices.Index(tr.Log, e) }
	if len(tr.Log) != 8 || at("start a") != 0 || at("end a") != 1 ||
		at("start b") < at("end a") || at("start c") < at("end a") ||
		at("start d") < at("end b") || at("start d") < at("end c") {
		t.Errorf("log %v; want a first, then b and c, then d", tr.Log)
	}
	if got := res.Steps["d"].Output; got != "ab+ac" {
		t.Errorf("d's output = %q, want each need's output", got)
	}
}

func TestSchedulerOverlapsIndependentStepsUpToMaxParallel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxParallel string
		want        int
	}{
		{"max-parallel 5 runs five independent steps at once", "max-parallel: 5\n", 5},
		{"max-parallel 2 runs two at a time", "max-parallel: 2\n", 2},
		{"max-parallel 1 runs them one by one", "max-parallel: 1\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("name: wide\n" + tc.maxParallel + "steps:\n")
			for i := range 5 {
				// Each turn waits until want steps have run at once: the
				// overlap is an event (a scheduler that ran fewer would
				// leave them waiting), and Peak shows none ran beyond it.
				fmt.Fprintf(&b, "  - {id: s%d, uses: fake, with: {wait-for-peak: %d}}\n", i, tc.want)
			}
			res, tr := runFake(t, context.Background(), b.String())
			if fmt.Sprint(res.Status) != "succeeded" {
				t.Fatalf("run %s: %s", res.Status, statuses(res))
			}
			if tr.Peak != tc.want {
				t.Errorf("%d steps ran at once, want %d", tr.Peak, tc.want)
			}
		})
	}
}

func TestSchedulerPropagatesFailure(t *testing.T) {
	for _, tc := range []struct {
		name, yaml   string
		run, steps   string
		notStartedOf []string
	}{
		{
			"a failed step skips its dependants and theirs, and fails the run",
			`
name: chain
steps:
  - {id: a, uses: fake, with: {fail: true}}
  - {id: b, needs: a, uses: fake}
  - {id: c, needs: b, uses: fake}
`, "failed", "a=failed b=skipped c=skipped", []string{"b", "c"},
		},
		{
			"continue-on-error lets the dependants run and the run succeed",
			`
name: tolerant
steps:
  - {id: a, continue-on-error: true, uses: fake, with: {fail: true}}
  - {id: b, needs: a, uses: fake}
`, "succeeded", "a=failed b=succeeded", nil,
		},
		{
			"a failed step cancels its running sibling and skips what had not started",
			`
name: siblings
steps:
  - {id: a, uses: fake, with: {wait-for-peak: 2, fail: true}}
  - {id: slow, uses: fake, with: {wait-for-cancel: true}}
  - {id: later, needs: slow, uses: fake}
`, "failed", "a=failed later=skipped slow=cancelled", []string{"later"},
		},
		{
			"an if that is false skips the step and its dependants",
			`
name: guarded
steps:
  - {id: a, if: "false", uses: fake}
  - {id: b, needs: a, uses: fake}
`, "succeeded", "a=skipped b=skipped", []string{"a", "b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, tr := runFake(t, context.Background(), tc.yaml)
			if fmt.Sprint(res.Status) != tc.run || statuses(res) != tc.steps {
				t.Errorf("run %s: %s; want %s: %s", res.Status, statuses(res), tc.run, tc.steps)
			}
			for _, id := range tc.notStartedOf {
				if slices.Contains(tr.Started, id) {
					t.Errorf("step %s ran (started: %v)", id, tr.Started)
				}
			}
		})
	}
}

func TestSchedulerRetriesAFailedStep(t *testing.T) {
	for _, tc := range []struct {
		name, with      string
		retries         int
		status          string
		attempts, ended int
	}{
		{"a step that fails twice succeeds on its third attempt", "{fail-attempts: 2}", 2, "succeeded", 3, 3},
		{"a step that always fails stops after its retries", "{fail: true}", 1, "failed", 2, 2},
		{"a step that succeeds is not retried", "{}", 3, "succeeded", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, tr := runFake(t, context.Background(), fmt.Sprintf(`
name: retry
steps:
  - {id: a, retries: %d, uses: fake, with: %s}
`, tc.retries, tc.with))
			st := res.Steps["a"]
			if fmt.Sprint(st.Status) != tc.status || st.Attempts != tc.attempts || len(tr.Ended) != tc.ended {
				t.Errorf("step %s after %d attempts (%d ran); want %s after %d", st.Status, st.Attempts, len(tr.Ended), tc.status, tc.attempts)
			}
		})
	}
}

func TestSchedulerRunsForEachInOrderWithinMaxParallel(t *testing.T) {
	res, tr := runFake(t, context.Background(), `
name: each
inputs:
  files: {type: array, default: [c, a, b, d, e]}
steps:
  - id: review
    for-each: inputs.files
    max-parallel: 2
    uses: fake
    with: {output: "${{ index }}:${{ item }}", wait-for-peak: 2}
  - {id: after, needs: review, uses: fake, with: {output: "${{ steps.review.output[4] }}"}}
`)
	if fmt.Sprint(res.Status) != "succeeded" {
		t.Fatalf("run %s: %s", res.Status, statuses(res))
	}
	if got := fmt.Sprint(res.Steps["review"].Output); got != "[0:c 1:a 2:b 3:d 4:e]" {
		t.Errorf("output = %s, want the elements' outputs in item order", got)
	}
	if tr.Peak != 2 {
		t.Errorf("%d runs at once, want max-parallel's 2", tr.Peak)
	}
	if res.Steps["after"].Output != "4:e" {
		t.Errorf("after = %q", res.Steps["after"].Output)
	}
}

func TestSchedulerCancellation(t *testing.T) {
	t.Run("an interrupt cancels the running step, skips the rest and cancels the run", func(t *testing.T) {
		// The interrupt comes once a has started (an event, not a timer
		// that a loaded machine could fire before a starts); a waits for
		// it, so a run that ends at all was ended by it.
		wf, err := workflows.Parse("wf.yaml", []byte(`
name: interrupted
steps:
  - {id: a, uses: fake, with: {wait-for-cancel: true}}
  - {id: b, needs: a, uses: fake}
`))
		if err != nil {
			t.Fatal(err)
		}
		runID := fmt.Sprintf("interrupted-%d", time.Now().UnixNano()) // new under -count=N
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		go func() {
			for !slices.Contains(fake.Trace(runID).Started, "a") {
				time.Sleep(time.Millisecond)
			}
			cancel(engine.ErrInterrupted)
		}()
		ended := make(chan *engine.RunResult, 1)
		go func() {
			ended <- engine.Run(ctx, wf, engine.Options{RunID: runID, Workspace: t.TempDir(), Events: &sink{}})
		}()
		var res *engine.RunResult
		select {
		case res = <-ended:
		case <-time.After(time.Minute):
			t.Fatal("the run still runs a minute after a started: the interrupt did not end it")
		}
		tr := fake.Trace(runID)
		if fmt.Sprint(res.Status) != "cancelled" || statuses(res) != "a=cancelled b=skipped" {
			t.Errorf("run %s: %s; want cancelled: a=cancelled b=skipped", res.Status, statuses(res))
		}
		if slices.Contains(tr.Started, "b") {
			t.Error("b ran after the interrupt")
		}
	})
	t.Run("a step's timeout aborts it and fails it", func(t *testing.T) {
		res, _ := runFake(t, context.Background(), `
name: slow
steps:
  - {id: a, timeout: 50ms, uses: fake, with: {wait-for-cancel: true}}
`)
		st := res.Steps["a"]
		if fmt.Sprint(st.Status) != "failed" || st.StopReason != "aborted" || !strings.Contains(st.Error, "step timed out after 50ms") {
			t.Errorf("step %s/%s: %s", st.Status, st.StopReason, st.Error)
		}
	})
}

// TestANewKindIsOneFolder: steps/steptest's Fake is a whole kind in its own
// folder. Registered, it is known to uses:, its with: is checked strictly
// and by its own Prepare, each error at its value, its schema is part of
// the workflow schema, and its steps run.
func TestANewKindIsOneFolder(t *testing.T) {
	t.Run("its with: errors are placed on the value at fault", func(t *testing.T) {
		src := "name: t\nsteps:\n  - id: a\n    uses: fake\n    with:\n      output: x\n      sleep: soon\n      fail-atempts: 2\n"
		_, err := workflows.Parse("t.yaml", []byte(src))
		var es workflows.Errors
		if !errors.As(err, &es) {
			t.Fatalf("Parse = %v, want workflows.Errors", err)
		}
		// The misspelt key is the loader's to find (from Keys); Prepare,
		// which finds the bad duration, sees only a with: that decoded
		// cleanly.
		if len(es) != 1 || es[0].Line != 8 || es[0].Col != 7 || !strings.Contains(es[0].Msg, `did you mean "fail-attempts"?`) {
			t.Errorf("errors:\n%v", err)
		}
		_, err = workflows.Parse("t.yaml", []byte(strings.Replace(src, "fail-atempts", "fail-attempts", 1)))
		if !errors.As(err, &es) || len(es) != 1 || es[0].Line != 7 || es[0].Col != 14 || !strings.Contains(es[0].Msg, "with.sleep: want a duration") {
			t.Errorf("errors:\n%v", err)
		}
	})
	t.Run("its schema is in the workflow schema", func(t *testing.T) {
		schema, err := workflows.Schema()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(schema), `"#/definitions/fake"`) || !strings.Contains(string(schema), "A step that runs in-process") {
			t.Error("the workflow schema lacks the fake kind's with:")
		}
	})
	t.Run("its steps run", func(t *testing.T) {
		res, _ := runFake(t, context.Background(), "name: t\nsteps:\n  - {id: a, uses: fake, with: {output: \"hi ${{ workflow.name }}\"}}\n")
		if st := res.Steps["a"]; fmt.Sprint(st.Status) != "succeeded" || st.Output != "hi t" {
			t.Errorf("step %s: %q", st.Status, st.Output)
		}
	})
}
