package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// ErrInterrupted is the cause a caller gives when the user interrupted the
// run (SIGINT, SIGTERM): steps in flight become `cancelled`, the run too.
var ErrInterrupted = errors.New("interrupted")

// errRunFailing is the cause with which running steps are cancelled when
// another step failed.
var errRunFailing = errors.New("cancelled: another step failed")

// Options are the parameters of one run.
type Options struct {
	RunID     string            // minted when empty
	Workspace string            // absolute
	Inputs    map[string]any    // resolved: defaults applied, types checked
	Ambient   map[string]string // acpflow's environment: `env` in expressions, the env policy's input
	// Outer is the outer policy every step's policies decide within; nil:
	// none.
	Outer   policies.Outer
	Events  steps.Sink
	Timeout time.Duration // the whole run; 0: none
	// Done holds results of steps that already succeeded in an earlier
	// attempt at this run (resume): they are not run again, and their
	// outputs feed their dependants.
	Done map[string]*StepResult
	// RetryBackoff is the first wait between attempts, doubled each time;
	// 0 means one second.
	RetryBackoff time.Duration
	// Recorder, when set, keeps the run as it happens (the run store).
	Recorder Recorder
	// OnUsage, when set, hears the run's usage so far each time one of
	// its agents reports more: what a batch's budget follows.
	OnUsage func(runID string, total *steps.Usage)
	// BatchReached, when set, says why the batch's budget allows no more
	// spending (nil: it does): what a model gateway asks before each
	// request, beside the run's own budget.
	BatchReached func() error
	// Batch is the scope the runs of a batch share (steps.Scope), which
	// its owner ends after the batch; nil: the run has one of its own,
	// ended before run_end.
	Batch *steps.Scope
	// Asker puts the requests a permission policy decides to ask about to
	// a person (steps.Invocation.Asker); nil: no one, the fallback decides.
	Asker policies.Asker
	// Worktree is the run's own worktree (the workflow's isolation:
	// worktree), made before the run: its steps work there. Worktrees
	// makes the steps' own and ends every one when the run ends. Nil: the
	// steps work in Workspace.
	Worktree  *Worktree
	Worktrees Worktrees
	// StateFiles are acpflow's own files that every sandbox denies
	// (steps.Invocation.StateFiles): the run store, the state directory.
	StateFiles []string
}

// NewRunID mints a run id: sortable by time, unique by its random tail.
func NewRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// run is the state of one run.
type run struct {
	wf   *Workflow
	opt  Options
	res  *RunResult
	sink steps.Sink

	index map[string]int // step id → position in wf.Steps

	mu      sync.Mutex
	results map[string]*StepResult // settled steps

	// lingering counts the steps' goroutines, which live on past their
	// settling until the agents they started are gone (steps.Invocation
	// Linger): the run ends only when all are done.
	lingering sync.WaitGroup

	// kept is the run's steps.Scope, batch the batch's (or the run's own,
	// then ownBatch).
	kept, batch *steps.Scope
	ownBatch    bool
	// continuedBy lists, per step, the steps that continue its session.
	continuedBy map[string][]string
	// meter follows the usage the steps report, against the budget.
	meter *meter
	// sched decides what runs when (schedule.go); only schedule's loop
	// feeds it.
	sched *Schedule
	// unowned keeps the permission records of no step (unowned.go).
	unowned *runPermissions
	// wts are the steps' worktrees (worktree.go).
	wts worktrees
}

// Run runs the workflow to the end and returns its result. A step settles
// (and its dependants may start) when its turn ends; Run returns only when
// every step has settled and every process a step started is gone.
// Cancelling ctx with cause ErrInterrupted makes the run `cancelled`.
func Run(ctx context.Context, wf *Workflow, opt Options) *RunResult {
	if opt.RunID == "" {
		opt.RunID = NewRunID()
	}
	if opt.Events == nil {
		opt.Events = steps.Discard{}
	}
	if opt.RetryBackoff == 0 {
		opt.RetryBackoff = FirstBackoff
	}
	r := &run{
		wf: wf, opt: opt, sink: opt.Events, index: make(map[string]int, len(wf.Steps)),
		results: make(map[string]*StepResult, len(wf.Steps)),
		res: &RunResult{
			RunID: opt.RunID, Workflow: wf.Name, Workspace: opt.Workspace, Inputs: opt.Inputs, Outputs: map[string]any{},
			StartedAt: time.Now().UTC(), Steps: make(map[string]*StepResult, len(wf.Steps)),
			Worktree: opt.Worktree,
		},
	}
	if opt.Recorder != nil {
		r.sink = teeSink{opt.Events, opt.Recorder}
		opt.Recorder.RunStarted(r.res)
	}
	r.unowned = &runPermissions{Sink: r.sink}
	r.sink = r.unowned
	for id, done := range opt.Done {
		r.results[id] = done
	}
	r.kept, r.batch = steps.NewScope(1), opt.Batch
	if r.batch == nil {
		r.batch, r.ownBatch = steps.NewScope(1), true
	}
	r.continuedBy = continuers(wf)
	ids := make([]string, len(wf.Steps))
	for i, st := range wf.Steps {
		ids[i] = st.ID
		r.index[st.ID] = i
	}
	r.emit("", steps.RunStart{Workflow: wf.Name, Workspace: opt.Workspace, Steps: ids})

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var onTotal func(*steps.Usage)
	if opt.OnUsage != nil {
		onTotal = func(t *steps.Usage) { opt.OnUsage(opt.RunID, t) }
	}
	// A budget exceeded cancels the run as a failed step does: running
	// steps are cancelled with the budget's error, nothing new starts.
	r.meter = newMeter(wf.Budget, cancel, onTotal)
	r.meter.batch = opt.BatchReached
	for _, done := range opt.Done {
		r.meter.addSettled(done.Usage)
	}
	if opt.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, opt.Timeout, fmt.Errorf("run timed out after %s", opt.Timeout))
		defer stop()
	}
	r.schedule(ctx, runCtx, cancel)
	// What the steps kept for each other (a session a skipped step would
	// have continued), then what they kept for later runs when the run is
	// its own batch, then every agent's teardown.
	r.kept.End()
	if r.ownBatch {
		r.batch.End()
	}
	r.lingering.Wait()
	r.finish(ctx)
	return r.res
}

// Unrun is the result of a step whose needs have settled (their results
// in results) when it does not run, nil when it runs: skipped, "not
// started: STOPPING" when the run is stopping (stopping says why; "": it
// is not); skipped when a need failed (without continue-on-error), was
// skipped or cancelled, or its `if:` is false; failed when its `if:`
// errors or gives no boolean (fail closed: skipping could pass over a
// guard). scope is called only when the `if:` is evaluated.
func (wf *Workflow) Unrun(st *Step, results map[string]*StepResult, scope func() *Scope, stopping string) *StepResult {
	if stopping != "" {
		return Skipped("not started: " + stopping)
	}
	for _, n := range st.Needs {
		res := results[n]
		switch {
		case res.Status == StatusFailed && !wf.Step(n).ContinueOnError:
			return Skipped(fmt.Sprintf("needs %s, which failed", n))
		case res.Status == StatusSkipped || res.Status == StatusCancelled:
			return Skipped(fmt.Sprintf("needs %s, which was %s", n, res.Status))
		}
	}
	if st.If != nil {
		ok, err := st.If.Bool(scope())
		if err != nil {
			return Errored(fmt.Sprintf("step %s: if: %v", st.ID, err))
		}
		if !ok {
			return Skipped("if: " + st.If.Source + " is false")
		}
	}
	return nil
}

// Step is the step with the id, nil if none.
func (wf *Workflow) Step(id string) *Step {
	for _, st := range wf.Steps {
		if st.ID == id {
			return st
		}
	}
	return nil
}

// ord is a step's position in the file, which the store orders steps by.
func (r *run) ord(id string) int { return r.index[id] }

func (r *run) settle(st *Step, res *StepResult) {
	if r.opt.Recorder != nil {
		// Durable before anything depends on it.
		r.opt.Recorder.StepEnded(r.opt.RunID, st.ID, r.ord(st.ID), res)
	}
	r.mu.Lock()
	r.results[st.ID] = res
	r.res.Steps[st.ID] = res
	r.mu.Unlock()
	r.emit(st.ID, steps.StepEnd{Status: string(res.Status), StopReason: res.StopReason, Attempts: res.Attempts, DurationMS: res.DurationMS, Error: res.Error, Usage: res.Usage})
	r.kept.Settled(st.ID)
}

// sessionOf is the session id step id recorded, "" if none.
func (r *run) sessionOf(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res := r.results[id]; res != nil {
		return res.SessionID
	}
	return ""
}

// continuers maps each step to the steps that continue or fork its
// session (steps.SessionStep), in file order.
func continuers(wf *Workflow) map[string][]string {
	by := map[string][]string{}
	for _, st := range wf.Steps {
		if ss, ok := st.Run.(steps.SessionStep); ok {
			if from, _ := ss.Continues(); from != "" {
				by[from] = append(by[from], st.ID)
			}
		}
	}
	return by
}

// scope is what expressions see: inputs, env, the settled steps, run,
// workflow, and for a for-each element its item and index.
func (r *run) scope(el *Element) *Scope {
	r.mu.Lock()
	results := make(map[string]*StepResult, len(r.results))
	for id, res := range r.results {
		results[id] = res
	}
	r.mu.Unlock()
	return r.wf.Scope(r.scopeOf(results), el)
}

// scopeOf is the run's ScopeOf with results: run.workspace is where the
// steps work (the run's worktree when it has one).
func (r *run) scopeOf(results map[string]*StepResult) ScopeOf {
	of := ScopeOf{RunID: r.opt.RunID, Workspace: r.opt.Workspace, Inputs: r.opt.Inputs, Env: r.opt.Ambient, Results: results, Worktree: r.opt.Worktree}
	if r.opt.Worktree != nil {
		of.Workspace = r.opt.Worktree.Path
	}
	return of
}

// ScopeOf is what a run's expressions are evaluated from: the run, its
// inputs, the environment they may read as env, and the steps settled so
// far.
type ScopeOf struct {
	RunID, Workspace string
	Inputs           map[string]any
	Env              map[string]string
	Results          map[string]*StepResult
	// Worktree is the run's own worktree (run.worktree); nil: none.
	Worktree *Worktree
}

// Scope is the scope of expressions of a run (and, for a for-each
// element, el's item and index; nil: none).
func (wf *Workflow) Scope(of ScopeOf, el *Element) *Scope {
	stepsScope := make(map[string]any, len(of.Results))
	for _, st := range wf.Steps {
		if res := of.Results[st.ID]; res != nil {
			stepsScope[st.ID] = res.scopeValue(st.Structured())
		}
	}
	if len(stepsScope) < len(of.Results) { // results of steps the workflow no longer has
		for id, res := range of.Results {
			if _, ok := stepsScope[id]; !ok {
				stepsScope[id] = res.scopeValue(false)
			}
		}
	}
	env := make(map[string]any, len(of.Env))
	for k, v := range of.Env {
		env[k] = v
	}
	s := &Scope{
		Inputs:   of.Inputs,
		Env:      env,
		Steps:    stepsScope,
		Run:      map[string]any{"id": of.RunID, "workspace": of.Workspace},
		Workflow: map[string]any{"name": wf.Name},
	}
	if of.Worktree != nil {
		s.Run["worktree"] = of.Worktree.scopeValue()
	}
	if el != nil {
		s.Item, s.Index = el.Item, el.Index
	}
	return s
}

// Element is one element of a for-each: its item and its index in the
// list.
type Element struct {
	Item  any
	Index int
}

// finish computes the run's status and outputs and emits run_end: the
// status and error as the schedule ended the run, then the store's health
// and the outputs.
func (r *run) finish(ctx context.Context) {
	for _, st := range r.wf.Steps {
		if r.res.Steps[st.ID] == nil { // succeeded in an earlier attempt (resume)
			r.res.Steps[st.ID] = r.results[st.ID]
		}
	}
	status, msg := r.sched.End()
	r.res.Error = msg
	// The worktrees are committed even when the run is interrupted: what
	// the agents did is on their branches, for a look or a resume.
	if err := r.closeWorktrees(context.WithoutCancel(ctx)); err != nil && status == StatusSucceeded {
		status, r.res.Error = StatusFailed, err.Error()
	}
	if r.opt.Recorder != nil && status == StatusSucceeded {
		if err := r.opt.Recorder.Err(); err != nil {
			status = StatusFailed
			r.res.Error = "the run store could not record the run: " + err.Error()
		}
	}
	r.res.OutputNames = r.wf.OutputNames()
	if status == StatusSucceeded {
		if err := r.wf.RenderOutputs(r.scope(nil), r.res.Outputs); err != nil {
			status = StatusFailed
			r.res.Error = err.Error()
		}
	}
	r.res.Usage = r.usage()
	r.res.Permissions = r.unowned.close()
	r.res.Status = status
	r.res.DurationMS = time.Since(r.res.StartedAt).Milliseconds()
	end := steps.RunEnd{Status: string(status), DurationMS: r.res.DurationMS, Error: r.res.Error}
	if r.res.Usage != nil {
		end.Usage = &r.res.Usage.Usage
	}
	if r.res.Worktree != nil {
		end.Worktree = r.res.Worktree
	}
	r.emit("", end)
	if r.opt.Recorder != nil {
		r.opt.Recorder.RunEnded(r.res)
	}
}

// RenderOutputs renders the workflow's outputs into out, in file order;
// the first that fails is the error (`outputs.NAME: …`).
func (wf *Workflow) RenderOutputs(scope *Scope, out map[string]any) error {
	for _, o := range wf.Outputs {
		v, err := o.Value.Render(scope)
		if err != nil {
			return fmt.Errorf("outputs.%s: %v", o.Name, err)
		}
		out[o.Name] = v
	}
	return nil
}

// OutputNames are the names of the workflow's outputs, in file order.
func (wf *Workflow) OutputNames() []string {
	names := make([]string, len(wf.Outputs))
	for i, o := range wf.Outputs {
		names[i] = o.Name
	}
	return names
}

// usage sums the steps' usage, in file order (nil: none reported).
func (r *run) usage() *RunUsage { return r.wf.Usage(r.res.Steps) }

// Usage sums the usage of the steps' results, in file order (nil: none
// reported).
func (wf *Workflow) Usage(results map[string]*StepResult) *RunUsage {
	us := make([]*steps.Usage, 0, len(wf.Steps))
	ran := make([]bool, 0, len(wf.Steps))
	for _, st := range wf.Steps {
		if res := results[st.ID]; res != nil {
			us = append(us, res.Usage)
			ran = append(ran, res.Attempts > 0)
		}
	}
	return SumUsage(us, ran)
}

// Spent is what the settled steps in results spent, as a budget counts it
// (nil: nothing reported): a scheduler's sum, which an attempt may change.
func (wf *Workflow) Spent(results map[string]*StepResult) *steps.Usage {
	u := wf.Usage(results)
	if u == nil {
		return nil
	}
	return u.Usage.Clone() // SumUsage left out the context fields
}

// teeSink sends every event to two sinks.
type teeSink [2]steps.Sink

func (t teeSink) Emit(e steps.Event) {
	t[0].Emit(e)
	t[1].Emit(e)
}

func (r *run) emit(step string, d steps.EventData) { r.emitAt(step, nil, d) }

// emitAt emits an event of step's for-each element el (nil: of the step,
// or of the run).
func (r *run) emitAt(step string, el *Element, d steps.EventData) {
	r.sink.Emit(steps.Event{RunID: r.opt.RunID, Step: step, Index: Index(el), Time: time.Now(), Data: d})
}

// elementSink is sink for the events of a for-each element's attempt:
// each gets the element's index, whichever part of the step kind emits it
// (its chunks, permissions, turn_end, teardown), so that no step kind
// needs to know it runs an element. For a step without for-each (el nil)
// it is sink.
func elementSink(sink steps.Sink, el *Element) steps.Sink {
	if el == nil {
		return sink
	}
	return indexSink{sink, el.Index}
}

type indexSink struct {
	steps.Sink
	index int
}

func (s indexSink) Emit(e steps.Event) {
	i := s.index
	e.Index = &i
	s.Sink.Emit(e)
}
