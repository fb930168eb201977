package flow

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/enginetest"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/steptest"
	"github.com/acpflow/acpflow/workflows"
)

// fake is the fake step kind, registered as a kind's init would.
var fake = steptest.NewFake()

func init() { steps.Register(fake) }

// The scheduling conformance suite (engine/enginetest) on the Temporal
// interpreter, in the in-memory Temporal, with the worker's real activity
// running the fake steps: the same cases engine's tests run on the CLI's
// driver.
func TestConformanceOnTemporal(t *testing.T) {
	enginetest.Run(t, fake, func(t *testing.T, runID, path string) *engine.RunResult {
		res, _ := onTemporal(t, runID, path, signalIn)
		return res
	})
}

// onTemporal runs the workflow of fake steps loaded from path in the
// in-memory Temporal, with the worker's real activity, which signals with
// signal(env); it returns the run's result and the run's events (as
// EventsQuery answers them).
func onTemporal(t *testing.T, runID, path string, signal func(*testsuite.TestWorkflowEnvironment) Signaller) (*engine.RunResult, []string) {
	t.Helper()
	wf, err := workflows.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := workflows.ResolveInputs(wf, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	blobs := Blobs{Dir: filepath.Join(dir, "blobs")}
	b, err := NewBundle(blobs, path, wf)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	in := &Interpreter{Blobs: blobs}
	env.RegisterWorkflowWithOptions(in.Interpret, workflow.RegisterOptions{Name: WorkflowName})
	acts := &Activities{Blobs: blobs, Cache: filepath.Join(dir, "cache"), Ambient: policies.EnvMap(os.Environ()), Signal: signal(env)}
	env.RegisterActivityWithOptions(func(ctx context.Context, task Task) (Stored, error) {
		return acts.Attempt(ctx, task)
	}, activity.RegisterOptions{Name: ActivityName})
	env.SetTestTimeout(time.Minute)
	env.ExecuteWorkflow(WorkflowName, Request{
		RunID: runID, Bundle: b, Plan: PlanOf(wf), Workspace: dir, Inputs: inputs, Heartbeat: 5 * time.Second, // see fixture.request
	})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	res, err := out.Result(blobs, dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := env.QueryWorkflow(EventsQuery, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []json.RawMessage
	if err := v.Get(&lines); err != nil {
		t.Fatal(err)
	}
	events := make([]string, len(lines))
	for i, l := range lines {
		events[i] = string(l)
	}
	return res, events
}

// signalIn sends an activity's signals to the workflow of env: the
// in-memory Temporal has no client an activity could signal with.
func signalIn(env *testsuite.TestWorkflowEnvironment) Signaller {
	return func(_ context.Context, _, _, name string, arg any) error {
		env.SignalWorkflow(name, arg)
		return nil
	}
}
