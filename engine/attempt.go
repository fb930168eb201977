package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// attemptResult is one attempt's outcome as a step's result, its status
// not yet decided (see ended).
func attemptResult(out steps.Result) *StepResult {
	res := &StepResult{
		StopReason: string(out.StopReason), Output: out.Output, Final: out.Final, JSON: out.JSON,
		SessionID: out.SessionID, Stderr: out.Stderr, Usage: out.Usage, Sandbox: out.Sandbox, ExitCode: out.ExitCode,
		Permissions: append([]policies.PermissionRecord{}, out.Permissions...),
	}
	if out.Err != nil {
		res.Error = out.Err.Error()
	}
	return res
}

// AddAttempt puts one attempt's result into the step's: what the last
// attempt said, every attempt's permission records and usage (every
// attempt's turn was spent). The caller sets Attempts.
func (res *StepResult) AddAttempt(a *StepResult) {
	perms, usage := res.Permissions, res.Usage
	*res = *a
	res.Permissions = append(perms, a.Permissions...)
	res.Usage = usage
	if a.Usage != nil {
		if res.Usage == nil {
			res.Usage = &steps.Usage{}
		}
		res.Usage.Add(a.Usage)
	}
}

// ended decides res's status when the attempt out ends the step: its
// turn completed (succeeded), or ctx cut it (cancelled: the run is being
// interrupted, a sibling failed, a timeout or a budget; the error is the
// cause unless the step gave one). A failure it leaves to the caller,
// whose retries decide.
func ended(ctx context.Context, res *StepResult, out steps.Result) bool {
	switch {
	case out.StopReason == steps.Completed:
		res.Status = StatusSucceeded
	case ctx.Err() != nil:
		res.Status = StatusCancelled
		if res.Error == "" {
			res.Error = context.Cause(ctx).Error()
		}
	default:
		return false
	}
	return true
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
	// TurnEnded, when set, is called with the attempt's result as soon as
	// its turn ends, before its agents are torn down (SPEC §8: the step
	// settles then): a scheduler elsewhere can start the step's dependants
	// while the teardown goes on. RunAttempt still returns only once the
	// agents are gone, with the same result (cancelled instead if ctx ends
	// meanwhile and the turn had not completed).
	TurnEnded func(*StepResult)
	// StateFiles are the worker's own files every sandbox denies
	// (Options.StateFiles).
	StateFiles []string
	// Asker puts the requests a policy decides to ask about to a person
	// (Options.Asker); nil: no one, the ask-fallback decides.
	Asker policies.Asker
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
	st := wf.Step(stepID)
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
			Outer: opt.Outer, Events: opt.Events, StateFiles: opt.StateFiles, Asker: opt.Asker,
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
	if opt.TurnEnded != nil {
		opt.TurnEnded(attemptEnd(ctx, out, opt.Attempt))
	}
	r.kept.End()
	r.batch.End()
	linger.Wait()
	return attemptEnd(ctx, out, opt.Attempt), nil
}

// attemptEnd is the result of attempt n, whose turn gave out.
func attemptEnd(ctx context.Context, out steps.Result, n int) *StepResult {
	res := attemptResult(out)
	res.Attempts = n
	if !ended(ctx, res, out) {
		res.Status = StatusFailed
	}
	return res
}
