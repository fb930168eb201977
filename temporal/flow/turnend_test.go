package flow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/acpflow/acpflow/engine"
)

// runFake loads yaml and runs it on Temporal with signal as the worker's
// signaller, returning its result, the fake steps' log and how many retry
// events the run emitted.
func runFake(t *testing.T, yaml string, signal func(*testsuite.TestWorkflowEnvironment) Signaller) (*engine.RunResult, []string, int) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	runID := "turnend-" + t.Name()
	res, events := onTemporal(t, runID, path, signal)
	retries := 0
	for _, e := range events {
		if strings.Contains(e, `"retry"`) {
			retries++
		}
	}
	return res, fake.Trace(runID).Log, retries
}

// A workflow whose first step's agent takes a while to go, and a step
// that needs it and reads its output.
const slowTeardown = `
name: slow
max-parallel: 2
steps:
  - {id: a, uses: fake, retries: 1, with: {output: a, fail-attempts: 1, teardown: 300ms}}
  - {id: b, needs: [a], uses: fake, with: {output: "${{ steps.a.output }}b"}}
outputs:
  b: ${{ steps.b.output }}
`

// Covers the turn-end signal when it is missing, repeated or stray: a
// worker that cannot signal (or of an earlier release, which does not)
// still settles each step, only at the activity's completion; a signal
// sent twice (a worker that ran the attempt again after signalling) or
// for an attempt the run never made changes nothing: a's retry counts
// once per attempt.
func TestTheTurnEndSignalMissingRepeatedOrStrayChangesNoResult(t *testing.T) {
	for _, c := range []struct {
		name         string
		signal       func(*testsuite.TestWorkflowEnvironment) Signaller
		settlesAtEnd bool // b starts only once a is gone
	}{
		{"a worker that cannot signal", func(*testsuite.TestWorkflowEnvironment) Signaller {
			return func(context.Context, string, string, string, any) error { return errors.New("no server") }
		}, true},
		{"a worker that signals twice", func(env *testsuite.TestWorkflowEnvironment) Signaller {
			return func(_ context.Context, _, _, name string, arg any) error {
				env.SignalWorkflow(name, arg)
				env.SignalWorkflow(name, arg)
				return nil
			}
		}, false},
		{"a worker that also signals attempts the run never made", func(env *testsuite.TestWorkflowEnvironment) Signaller {
			return func(_ context.Context, _, _, name string, arg any) error {
				te := arg.(TurnEnd)
				stray := te
				stray.Attempt += 5
				env.SignalWorkflow(name, stray)
				stray = te
				stray.Step = "nosuchstep"
				env.SignalWorkflow(name, stray)
				env.SignalWorkflow(name, te)
				return nil
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, log, retries := runFake(t, slowTeardown, c.signal)
			if retries != 1 {
				t.Errorf("%d retry events, want 1 (a's first attempt failed once)", retries)
			}
			if res.Status != engine.StatusSucceeded || res.Outputs["b"] != "ab" {
				t.Fatalf("run %s, outputs %v; want succeeded with b=ab", res.Status, res.Outputs)
			}
			if a := res.Steps["a"]; a.Attempts != 2 || a.Status != engine.StatusSucceeded {
				t.Errorf("a: %s after %d attempts, want succeeded after 2", a.Status, a.Attempts)
			}
			// The run ends only after every teardown.
			if slices.Index(log, "gone a") < 0 || slices.Index(log, "end b") < 0 {
				t.Fatalf("log %v: the run ended before a's agents were gone", log)
			}
			bBeforeGone := slices.Index(log, "start b") < lastIndex(log, "gone a")
			if bBeforeGone == c.settlesAtEnd {
				t.Errorf("log %v: b started before a was gone: %v, want %v", log, bBeforeGone, !c.settlesAtEnd)
			}
		})
	}
}

func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}

// Covers a cancellation that comes once every step has settled, while an
// agent is still being torn down: the run's end is decided (succeeded, as
// the CLI's would be), and the cancellation only cuts the teardown short.
// (That the run still waits for the teardown is the activity's
// WaitForCancellation, which a real server honours and the in-memory one
// does not: it answers a cancel at once.) A cancellation mid-turn is
// TestCancellingARunTearsItsAgentDown's.
func TestACancellationDuringTheLastTeardownLeavesTheRunsEnd(t *testing.T) {
	res, log, _ := runFake(t, `
name: lastgoes
steps:
  - {id: a, uses: fake, with: {output: a, teardown: 300ms}}
`, func(env *testsuite.TestWorkflowEnvironment) Signaller {
		return func(_ context.Context, _, _, name string, arg any) error {
			env.SignalWorkflow(name, arg)
			env.CancelWorkflow()
			return nil
		}
	})
	if res.Status != engine.StatusSucceeded || res.Steps["a"].Status != engine.StatusSucceeded {
		t.Errorf("run %s (%s), a %s: want both succeeded", res.Status, res.Error, res.Steps["a"].Status)
	}
	if !slices.Contains(log, "end a") {
		t.Errorf("log %v: a's turn never ended", log)
	}
}
