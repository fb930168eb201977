package flow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// badTask is the error type of a task no worker can run (its bundle does
// not load, its step does not exist): Temporal does not retry it.
const badTask = "acpflow.bad-task"

// Task is one attempt of one step (or for-each element) of a run, as an
// activity's input.
type Task struct {
	RunID     string
	Bundle    Bundle
	Step      string
	Element   *engine.Element `json:",omitempty"`
	Attempt   int
	Workspace string
	Inputs    map[string]any
	// Settled are the results of the steps the step needs, directly or
	// not: what its templates may read.
	Settled map[string]Stored `json:",omitempty"`
	// Spent is what the run's settled steps spent: the attempt is
	// cancelled once it and they are over the workflow's budget.
	Spent *steps.Usage `json:",omitempty"`
	// TurnEnd asks the worker to send the run's workflow TurnEndSignal
	// when the attempt's turn ends, before teardown: the workflow listens
	// for it (a worker of an earlier release ignores it, and the
	// activity's completion then says both).
	TurnEnd bool `json:",omitempty"`
}

// TurnEndSignal is the signal an attempt's activity sends its run's
// workflow when the attempt's turn ends (a TurnEnd): the step settles
// then, as on the CLI, and its dependants start while its agents are torn
// down; the activity's completion frees its slot.
const TurnEndSignal = "acpflow.turn-end"

// TurnEnd is an attempt's result at its turn's end, as TurnEndSignal
// carries it.
type TurnEnd struct {
	Step    string
	Index   *int `json:",omitempty"` // the for-each element's; nil: none
	Attempt int
	Result  Stored
}

// Signaller sends a workflow execution a signal; the Temporal client's
// SignalWorkflow is one.
type Signaller func(ctx context.Context, workflowID, runID, name string, arg any) error

// Activities runs attempts on a worker: the policies and env policies
// decide here, with the worker's environment, so that the workflow's
// history never holds a secret.
type Activities struct {
	Blobs Blobs
	// Cache is where bundles are unpacked (a directory per bundle).
	Cache string
	// Ambient is the worker's environment: `env` in templates, and what
	// the env policies pass to agents.
	Ambient map[string]string
	// Outer is the worker's outer policy (its --policy and config files).
	Outer policies.Outer
	// StateFiles are acpflow's own files on the worker's machine, which
	// every sandbox denies (engine.Options.StateFiles); nil: none.
	StateFiles []string
	// Signal sends TurnEndSignal and the approval signals; nil: the
	// worker's client (activity.GetClient).
	Signal Signaller
	// Query asks the run's workflow its approvals (ApprovalsQuery); nil:
	// the worker's client.
	Query Querier

	mu     sync.Mutex
	loaded map[string]*engine.Workflow
	order  []string // the keys of loaded, oldest first
}

// maxLoaded bounds the workflows a worker keeps loaded: a worker that
// lives for months sees every edit of every file as a new bundle.
const maxLoaded = 32

// Attempt runs one attempt to its end and tears the agent down, as the
// CLI does. It heartbeats while the agent runs; when Temporal cancels the
// attempt (the run was cancelled, or the heartbeat timed out) its context
// ends and the agent's process group is torn down before it returns.
func (a *Activities) Attempt(ctx context.Context, t Task) (Stored, error) {
	wf, err := a.workflow(t.Bundle)
	if err != nil {
		return Stored{}, temporal.NewNonRetryableApplicationError(err.Error(), badTask, nil)
	}
	settled := make(map[string]*engine.StepResult, len(t.Settled))
	for id, st := range t.Settled {
		if settled[id], err = a.Blobs.Load(st); err != nil {
			return Stored{}, err
		}
	}
	opt := engine.AttemptOptions{
		RunID: t.RunID, Workspace: t.Workspace, Inputs: t.Inputs, Ambient: a.Ambient, Outer: a.Outer,
		Results: settled, Element: t.Element, Attempt: t.Attempt, Spent: t.Spent, StateFiles: a.StateFiles,
		Asker: a.asker(ctx, t, wf.Name),
	}
	if t.TurnEnd {
		opt.TurnEnded = func(res *engine.StepResult) { a.turnEnded(ctx, t, res) }
	}
	stop := heartbeat(ctx)
	res, err := engine.RunAttempt(ctx, wf, t.Step, opt)
	stop()
	if err != nil {
		return Stored{}, temporal.NewNonRetryableApplicationError(err.Error(), badTask, nil)
	}
	return a.Blobs.store(forWorkflow(ctx, res))
}

// forWorkflow is res as the workflow takes it. Cancelled or not, the turn
// is over: the result says what became of the step (cancelled, with what
// it had said), as on the CLI. Why it was cancelled is the workflow's to
// say: here it is only Temporal's "canceled".
func forWorkflow(ctx context.Context, res *engine.StepResult) *engine.StepResult {
	if res.Status == engine.StatusCancelled && ctx.Err() != nil && res.Error == context.Cause(ctx).Error() {
		res.Error = ""
	}
	return res
}

// turnEnded tells the run's workflow that attempt t's turn ended with
// res. A signal that cannot be sent is only logged: the activity's
// completion says the same a teardown later. An attempt Temporal
// cancelled (the run stopped, or the attempt is no longer this worker's)
// signals nothing: its completion says it was cancelled.
func (a *Activities) turnEnded(ctx context.Context, t Task, res *engine.StepResult) {
	if ctx.Err() != nil {
		return
	}
	log := activity.GetLogger(ctx)
	stored, err := a.Blobs.store(forWorkflow(ctx, res))
	if err != nil {
		log.Warn("the turn's end is not signalled: its result cannot be stored", "step", t.Step, "error", err)
		return
	}
	te := TurnEnd{Step: t.Step, Attempt: t.Attempt, Result: stored}
	if t.Element != nil {
		index := t.Element.Index
		te.Index = &index
	}
	signal := a.Signal
	if signal == nil {
		signal = activity.GetClient(ctx).SignalWorkflow
	}
	run := activity.GetInfo(ctx).WorkflowExecution
	if err := signal(ctx, run.ID, run.RunID, TurnEndSignal, te); err != nil {
		log.Warn("the turn's end is not signalled", "step", t.Step, "error", err)
	}
}

// heartbeat beats at a quarter of the attempt's heartbeat timeout until
// stopped.
func heartbeat(ctx context.Context) (stop func()) {
	every := DefaultHeartbeat / 4
	if info := activity.GetInfo(ctx); info.HeartbeatTimeout > 0 {
		every = info.HeartbeatTimeout / 4
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// workflow is the bundle's workflow, unpacked and loaded once per worker
// (while it is among the maxLoaded last loaded).
func (a *Activities) workflow(b Bundle) (*engine.Workflow, error) {
	key := b.key()
	a.mu.Lock()
	defer a.mu.Unlock()
	if wf := a.loaded[key]; wf != nil {
		return wf, nil
	}
	wf, err := b.unpack(a.Blobs, a.Cache)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", b.Name, err)
	}
	if a.loaded == nil {
		a.loaded = map[string]*engine.Workflow{}
	}
	if len(a.order) == maxLoaded {
		delete(a.loaded, a.order[0])
		a.order = a.order[1:]
	}
	a.loaded[key] = wf
	a.order = append(a.order, key)
	return wf, nil
}
