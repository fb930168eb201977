package runs

import (
	"context"
	"fmt"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
)

// ResultOf is a recorded run's result as it was handed to Result when the
// run ended (the --output line), rebuilt from the store. A resumed run
// started when it first started, and lasted until its last end.
func ResultOf(d *store.RunDetail) *engine.RunResult {
	res := &engine.RunResult{
		RunID: d.Run.ID, Workflow: d.Run.Workflow, Status: d.Run.Status, Error: d.Run.Error,
		Workspace: d.Run.Workspace, Inputs: d.Run.Inputs, Outputs: d.Run.Outputs, OutputNames: d.Run.OutputNames,
		StartedAt: d.Run.StartedAt, DurationMS: d.Run.DurationMS, Usage: d.Run.Usage,
		Steps: make(map[string]*engine.StepResult, len(d.Steps)),
	}
	if res.Inputs == nil {
		res.Inputs = map[string]any{}
	}
	if res.Outputs == nil {
		res.Outputs = map[string]any{}
	}
	for _, st := range d.Steps {
		res.Steps[st.StepID] = StepResult(st)
	}
	for _, wt := range d.Worktrees {
		switch sr := res.Steps[wt.Step]; {
		case wt.Step == "":
			res.Worktree = wt
		case sr == nil:
		case wt.Index != nil:
			sr.Worktrees = append(sr.Worktrees, wt)
		default:
			sr.Worktree = wt
		}
	}
	return res
}

// DeliverEnded hands to Result the result of every run of a claimed batch
// that succeeded and that delivered says was not handed on: a process
// killed between recording a run's end and writing its --output line
// leaves such runs, and resume, which does not run them again, writes
// them. It does so only when delivered holds a run of the batch: a file
// that holds none is not the batch's, and gets only the runs resume runs.
// Runs that did not succeed are not delivered here: resume runs them again
// and delivers their new result. It returns how many it delivered.
func (r *Runner) DeliverEnded(ctx context.Context, c *BatchClaim, delivered func(runID string) bool) (int, error) {
	if r.Result == nil {
		return 0, nil
	}
	var missing []string
	ours := false
	for after := 0; ; {
		page, err := r.Store.BatchLines(ctx, c.Batch.ID, after, linesPerWrite)
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			break
		}
		latest, err := r.Store.LatestRuns(ctx, c.Batch.ID, page[0].Line, page[len(page)-1].Line)
		if err != nil {
			return 0, err
		}
		for _, l := range page {
			run, ok := latest[l.Line]
			switch {
			case !ok:
			case delivered(run.ID):
				ours = true
			case run.Status == engine.StatusSucceeded:
				missing = append(missing, run.ID)
			}
		}
		if len(page) < linesPerWrite {
			break
		}
		after = page[len(page)-1].Line
	}
	if !ours {
		return 0, nil
	}
	for i, id := range missing {
		d, err := r.Store.GetRun(ctx, id)
		if err != nil {
			return i, fmt.Errorf("run %s: %w", id, err)
		}
		r.Result(ResultOf(d))
	}
	return len(missing), nil
}

// DeliverRun hands to Result the result of run id, which already
// succeeded, when delivered says it was not handed on (see DeliverEnded).
// It says whether it did.
func (r *Runner) DeliverRun(ctx context.Context, id string, delivered func(runID string) bool) (bool, error) {
	if r.Result == nil || delivered(id) {
		return false, nil
	}
	d, err := r.Store.GetRun(ctx, id)
	if err != nil {
		return false, err
	}
	r.Result(ResultOf(d))
	return true, nil
}
