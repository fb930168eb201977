package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// took puts one attempt's outcome into the step's result: what the last
// attempt said, every attempt's permission records and usage.
func (res *StepResult) took(out steps.Result) {
	res.StopReason = string(out.StopReason)
	res.Output = out.Output
	res.Final = out.Final
	res.JSON = out.JSON
	res.SessionID = out.SessionID
	res.Stderr = out.Stderr
	res.Permissions = append(res.Permissions, out.Permissions...)
	if out.Usage != nil {
		// Every attempt's turn was spent.
		if res.Usage == nil {
			res.Usage = &steps.Usage{}
		}
		res.Usage.Add(out.Usage)
	}
	res.Error = ""
	if out.Err != nil {
		res.Error = out.Err.Error()
	}
}

// AttemptOptions say which attempt RunAttempt runs, and what it sees.
type AttemptOptions struct {
	RunID     string
	Workspace string            // absolute
	Inputs    map[string]any    // resolved
	Ambient   map[string]string // the environment: `env` in templates, the env policy's input
	Outer     policies.Outer
	// Results are the settled steps the step's templates may read.
	Results map[string]*StepResult
	// Element is the for-each element to run; nil for a step without one.
	Element *Element
	Attempt int // from 1
	Events  steps.Sink
	// Spent is what the run's other steps spent so far (a scheduler's
	// sum): the attempt is cancelled, as a run's steps are, once it and
	// they together are over the workflow's budget.
	Spent *steps.Usage
}

// RunAttempt runs one attempt of one step (or of one for-each element) of
// a run that is scheduled elsewhere: a scale-out worker runs each attempt
// as its own task, and its scheduler decides retries, skips and the run's
// end (with SkipReason, Items, Combine and RenderOutputs, as Run does).
// It returns when the step's agents are gone. The result is succeeded when
// the turn completed, cancelled when ctx ended it (or the budget, as
// AttemptOptions.Spent says), failed otherwise; its Attempts is
// opt.Attempt.
func RunAttempt(ctx context.Context, wf *Workflow, stepID string, opt AttemptOptions) (*StepResult, error) {
	st := wf.step(stepID)
	if st == nil {
		return nil, fmt.Errorf("workflow %s has no step %q", wf.Name, stepID)
	}
	if (st.ForEach != nil) != (opt.Element != nil) {
		return nil, fmt.Errorf("step %s: a for-each step runs an element at a time, any other step without one", stepID)
	}
	if opt.Events == nil {
		opt.Events = steps.Discard{}
	}
	r := &run{
		wf: wf, sink: opt.Events, index: make(map[string]int, len(wf.Steps)),
		opt: Options{
			RunID: opt.RunID, Workspace: opt.Workspace, Inputs: opt.Inputs, Ambient: opt.Ambient,
			Outer: opt.Outer, Events: opt.Events,
		},
		results: make(map[string]*StepResult, len(opt.Results)),
	}
	for i, s := range wf.Steps {
		r.index[s.ID] = i
	}
	for id, res := range opt.Results {
		r.results[id] = res
	}
	r.kept, r.batch, r.ownBatch = steps.NewScope(1), steps.NewScope(1), true
	r.continuedBy = map[string][]string{}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.meter = newMeter(wf.Budget, cancel, nil)
	r.meter.addSettled(opt.Spent)
	var linger sync.WaitGroup
	out := r.attempt(ctx, st, opt.Attempt, opt.Element, &linger)
	r.kept.End()
	r.batch.End()
	linger.Wait()
	res := &StepResult{Attempts: opt.Attempt, Permissions: []policies.PermissionRecord{}}
	res.took(out)
	switch {
	case out.StopReason == steps.Completed:
		res.Status = StatusSucceeded
	case ctx.Err() != nil:
		res.Status = StatusCancelled
		if res.Error == "" {
			res.Error = context.Cause(ctx).Error()
		}
	default:
		res.Status = StatusFailed
	}
	return res, nil
}
