package flow

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// replay replays a recorded history with interpret registered as the
// workflow.
func replay(t *testing.T, file string, interpret func(workflow.Context, Request) (*Outcome, error)) error {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(interpret, workflow.RegisterOptions{Name: WorkflowName})
	return r.ReplayWorkflowHistoryFromJSONFile(nil, file)
}

func histories(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/histories (go test -tags temporalserver -run TestRecordHistories -update-histories records them)")
	}
	return files
}

// Histories recorded on a real Temporal server replay with today's
// interpreter: a change to it that would decide differently on a run
// already in flight (a nondeterminism) fails here, before it reaches the
// workers of a live deployment.
func TestRecordedHistoriesReplayWithTodaysInterpreter(t *testing.T) {
	for _, file := range histories(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			in := &Interpreter{Blobs: Blobs{Dir: t.TempDir()}}
			if err := replay(t, file, in.Interpret); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The replay has teeth: an interpreter that decides otherwise (here, one
// that drops an if:, so that a skipped step runs) fails it.
func TestAnInterpreterThatSchedulesOtherwiseFailsTheReplay(t *testing.T) {
	for _, file := range histories(t) {
		if !strings.Contains(file, "dag") {
			continue
		}
		in := &Interpreter{Blobs: Blobs{Dir: t.TempDir()}}
		otherwise := func(ctx workflow.Context, req Request) (*Outcome, error) {
			i := slices.IndexFunc(req.Plan.Steps, func(s PlanStep) bool { return s.ID == "no" })
			req.Plan.Steps[i].If = ""
			return in.Interpret(ctx, req)
		}
		if err := replay(t, file, otherwise); err == nil || !strings.Contains(err.Error(), "nondetermin") {
			t.Errorf("%s: an interpreter that runs a skipped step replayed it: %v", file, err)
		}
		return
	}
	t.Fatal("no dag history")
}
