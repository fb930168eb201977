package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
)

// A run is recorded as it happens: created when it starts, each step saved
// when it starts and ends, events appended as they come, finished at its end.
func Example() {
	dir, _ := os.MkdirTemp("", "acpflow-store")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := store.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	start := time.Now()
	s.CreateRun(ctx, store.Run{ID: "01JRUN0001", Workflow: "review", Inputs: map[string]any{"pr": "42"}, StartedAt: start})
	s.SaveStep(ctx, store.Step{RunID: "01JRUN0001", StepID: "plan", Status: engine.StatusRunning, StartedAt: start})
	s.AppendEvent(store.Event{RunID: "01JRUN0001", StepID: "plan", Type: "step_update", Fields: map[string]any{"text": "Looking"}})
	s.SaveStep(ctx, store.Step{RunID: "01JRUN0001", StepID: "plan", Status: engine.StatusSucceeded, StopReason: "completed",
		Output: "LGTM", Attempts: 1, StartedAt: start, EndedAt: start.Add(time.Second), DurationMS: 1000,
		Permissions: []store.Permission{{ToolCallID: "call_1", Kind: "read", Decision: "allow", Outcome: "selected", OptionID: "a1", Policy: "default"}}})
	s.FinishRun(ctx, "01JRUN0001", engine.StatusSucceeded, "", map[string]any{"verdict": "LGTM"}, start.Add(2*time.Second))

	id, kind, _ := s.ResolveID(ctx, "01JRUN") // a unique prefix, as `acpflow show` takes it
	d, _ := s.GetRun(ctx, id)
	fmt.Println(kind, d.Run.ID, d.Run.Status, d.Run.DurationMS, d.Run.Outputs["verdict"])
	for _, st := range d.Steps {
		fmt.Println(st.StepID, st.Status, st.Output, st.Permissions[0].Decision)
	}
	s.Flush(ctx)
	events, _ := s.Events(ctx, id)
	fmt.Println(len(events), events[0].Type, events[0].Fields["text"])
	// Output:
	// run 01JRUN0001 succeeded 2000 LGTM
	// plan succeeded LGTM allow
	// 1 step_update Looking
}
