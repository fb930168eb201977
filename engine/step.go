package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// The wait between a step's attempts: FirstBackoff (unless
// Options.RetryBackoff says otherwise), doubled each time, at most
// MaxBackoff. A scheduler elsewhere (a scale-out workflow) waits the same.
const (
	FirstBackoff = time.Second
	MaxBackoff   = 30 * time.Second
)

// NextBackoff is the wait after backoff.
func NextBackoff(backoff time.Duration) time.Duration { return min(backoff*2, MaxBackoff) }

// attempt runs the step kind once, under the step's timeout.
func (r *run) attempt(ctx context.Context, st *Step, n int, el *Element, linger *sync.WaitGroup) steps.Result {
	scope := r.scope(el)
	rendered, err := renderValue(st.With, scope)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("with.%w", err)}
	}
	with, _ := rendered.(map[string]any)
	if with == nil {
		with = map[string]any{}
	}
	stepCtx := ctx
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithTimeoutCause(ctx, st.Timeout, fmt.Errorf("step timed out after %s", st.Timeout))
		defer cancel()
	}
	workspace, err := r.workspace(ctx, st, el)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	meter := r.meter.attempt()
	pol := PoliciesOf(r.wf, st)
	inv := &steps.Invocation{
		Workflow: r.wf.Name, RunID: r.opt.RunID, StepID: st.ID, Attempt: n,
		Workspace: workspace, With: with, Ambient: r.opt.Ambient,
		Permission: pol.Permission, PermissionSource: pol.PermissionSource, Env: pol.Env, EnvSource: pol.EnvSource, Outer: r.opt.Outer,
		Asker:   r.opt.Asker,
		Sandbox: r.wf.Sandbox, StateFiles: r.opt.StateFiles,
		Render: func(s string) (string, error) {
			t, err := ParseTemplate(s)
			if err != nil {
				return "", err
			}
			return t.Render(scope)
		},
		Events:    usageSink{elementSink(r.sink, el), meter},
		Processes: r.processes(st.ID),
		Lingering: linger,

		Run: r.kept, Batch: r.batch,
		ContinuedBy: r.continuedBy[st.ID],
		SessionOf:   r.sessionOf,

		BudgetReached: r.meter.reached,
	}
	out := st.Run.Run(stepCtx, inv)
	meter.done(out.Usage)
	if out.StopReason != steps.Completed && out.Err == nil {
		out.Err = errors.New("step did not complete")
	}
	return out
}

// Items evaluates the step's for-each: the list of its elements, or an
// error that says what is wrong (`for-each: …`).
func (st *Step) Items(scope *Scope) ([]any, error) {
	v, err := st.ForEach.Eval(scope)
	if err != nil {
		return nil, fmt.Errorf("for-each: %w", err)
	}
	items, err := forEachItems(v)
	if err != nil {
		return nil, scope.scrub(fmt.Errorf("for-each: %s: %w", st.ForEach.Source, err))
	}
	return items, nil
}

// Combine is a for-each step's result from its elements' results, in
// element order: outputs, finals (and values) as lists, the most attempts
// any element took, every permission record, and the first element that
// did not succeed as the step's status and error.
func (st *Step) Combine(each []*StepResult) *StepResult {
	res := &StepResult{Status: StatusSucceeded, StopReason: string(steps.Completed), Permissions: []policies.PermissionRecord{}}
	outputs := make([]any, len(each))
	finals := make([]any, len(each))
	values := make([]any, len(each))
	for i, e := range each {
		outputs[i] = e.Output
		finals[i] = e.Final
		values[i] = e.JSON
		res.Attempts = max(res.Attempts, e.Attempts)
		res.Permissions = append(res.Permissions, e.Permissions...)
		res.Stderr += e.Stderr
		if res.Sandbox == nil {
			res.Sandbox = e.Sandbox
		}
		if e.Usage != nil {
			if res.Usage == nil {
				res.Usage = &steps.Usage{}
			}
			res.Usage.Add(e.Usage)
		}
		if e.Status != StatusSucceeded && res.Status == StatusSucceeded {
			res.Status, res.StopReason = e.Status, e.StopReason
			res.Error = fmt.Sprintf("item %d: %s", i, e.Error)
		}
	}
	res.Output, res.Final = outputs, finals
	res.ExitCode = firstExitCode(each)
	if st.Structured() {
		res.JSON = values
	}
	return res
}

// firstExitCode is a for-each step's exit code: the first element whose
// command exited non-zero gives it, else 0 when any element ran a command
// (every one exited 0), else nil (no element runs one).
func firstExitCode(each []*StepResult) *int {
	var code *int
	for _, e := range each {
		switch {
		case e.ExitCode == nil:
		case *e.ExitCode != 0:
			return e.ExitCode
		case code == nil:
			code = e.ExitCode
		}
	}
	return code
}

// MaxForEachItems bounds the elements of one for-each: each element is a
// goroutine and a result held until the step ends, and a list longer than
// this is more likely a mistake (`1..1e6`) than a plan.
const MaxForEachItems = 10_000

// forEachItems is the list a for-each value gives: any list, whatever its
// elements' type (`1..3` is a []int, split() gives a []string).
func forEachItems(v any) ([]any, error) {
	if items, ok := v.([]any); ok {
		if len(items) > MaxForEachItems {
			return nil, fmt.Errorf("the list has %d elements, more than the limit of %d", len(items), MaxForEachItems)
		}
		return items, nil
	}
	rv := reflect.ValueOf(v)
	if v == nil || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
		return nil, fmt.Errorf("want a list, got %s", describe(v))
	}
	if rv.Len() > MaxForEachItems {
		return nil, fmt.Errorf("the list has %d elements, more than the limit of %d", rv.Len(), MaxForEachItems)
	}
	items := make([]any, rv.Len())
	for i := range items {
		items[i] = rv.Index(i).Interface()
	}
	return items, nil
}
