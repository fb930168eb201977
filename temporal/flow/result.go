package flow

import (
	"github.com/acpflow/acpflow/engine"
)

// Result is the run's result as the CLI gives it (--output's line), every
// step's result loaded from Blobs where it went by reference.
func (o *Outcome) Result(b Blobs, workspace string) (*engine.RunResult, error) {
	res := &engine.RunResult{
		RunID: o.RunID, Workflow: o.Workflow, Status: o.Status, Error: o.Error, Workspace: workspace, Inputs: o.Inputs,
		Outputs: o.Outputs, StartedAt: o.StartedAt.UTC(), DurationMS: o.DurationMS, Usage: o.Usage,
		Steps: make(map[string]*engine.StepResult, len(o.Steps)),
	}
	if res.Inputs == nil {
		res.Inputs = map[string]any{}
	}
	if res.Outputs == nil {
		res.Outputs = map[string]any{}
	}
	for id, st := range o.Steps {
		r, err := b.Load(st)
		if err != nil {
			return nil, err
		}
		res.Steps[id] = r
	}
	return res, nil
}
