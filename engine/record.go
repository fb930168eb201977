package engine

import (
	"context"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine/store"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Recorder keeps a run as it happens. The engine calls it synchronously:
// when StepEnded returns, the step's result is durable, so a resumed run
// never redoes a step that succeeded. Every event also goes to Emit.
type Recorder interface {
	steps.Sink
	RunStarted(res *RunResult)
	StepStarted(runID, stepID string, ord, attempt int)
	StepEnded(runID, stepID string, ord int, res *StepResult)
	RunEnded(res *RunResult)
	// Err is the first record the recorder could not keep: a run whose
	// record is incomplete does not say it succeeded.
	Err() error
}

// StoreRecorder records runs in the run store.
type StoreRecorder struct {
	Store *store.Store
	// Workflow is the workflow being run, for its file and hash.
	Workflow *Workflow
	// BatchID and BatchLine place the run in a batch; empty and 0 otherwise.
	BatchID   string
	BatchLine int
	// Resume makes RunStarted reopen the run instead of creating it.
	Resume bool
	// OwnerPID and OwnerStartTicks name the acpflow process running it.
	OwnerPID        int
	OwnerStartTicks uint64

	mu      sync.Mutex
	err     error
	started map[string]time.Time // step id → when its first attempt started
}

var _ Recorder = (*StoreRecorder)(nil)

// Err is the first error the store returned, if any: the run went on, but
// its record is incomplete.
func (r *StoreRecorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *StoreRecorder) fail(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// RunStarted implements Recorder.
func (r *StoreRecorder) RunStarted(res *RunResult) {
	ctx := context.Background()
	r.mu.Lock()
	r.started = map[string]time.Time{}
	r.mu.Unlock()
	if r.Resume {
		r.fail(r.Store.ReopenRun(ctx, res.RunID, r.OwnerPID, r.OwnerStartTicks))
		return
	}
	r.fail(r.Store.CreateRun(ctx, store.Run{
		ID: res.RunID, BatchID: r.BatchID, BatchLine: r.BatchLine,
		Workflow: r.Workflow.Name, WorkflowFile: r.Workflow.File, WorkflowHash: r.Workflow.Hash,
		Workspace: res.Workspace, Inputs: res.Inputs, StartedAt: res.StartedAt,
		OwnerPID: r.OwnerPID, OwnerStartTicks: r.OwnerStartTicks,
	}))
}

// StepStarted implements Recorder.
func (r *StoreRecorder) StepStarted(runID, stepID string, ord, attempt int) {
	now := time.Now()
	r.mu.Lock()
	if _, ok := r.started[stepID]; !ok {
		r.started[stepID] = now
	}
	began := r.started[stepID]
	r.mu.Unlock()
	r.fail(r.Store.SaveStep(context.Background(), store.Step{
		RunID: runID, StepID: stepID, Ord: ord, Status: store.StatusRunning, Attempts: attempt, StartedAt: began,
	}))
}

// StepEnded implements Recorder.
func (r *StoreRecorder) StepEnded(runID, stepID string, ord int, res *StepResult) {
	now := time.Now()
	r.mu.Lock()
	began, ok := r.started[stepID]
	r.mu.Unlock()
	if !ok {
		began = now
	}
	perms := make([]store.Permission, len(res.Permissions))
	for i, p := range res.Permissions {
		perms[i] = storePermission(p)
	}
	r.fail(r.Store.SaveStep(context.Background(), store.Step{
		RunID: runID, StepID: stepID, Ord: ord, Status: res.Status, StopReason: res.StopReason,
		Output: res.Output, Final: res.Final, Error: res.Error, Attempts: res.Attempts, SessionID: res.SessionID,
		Stderr: res.Stderr, StartedAt: began, EndedAt: now, DurationMS: res.DurationMS, Permissions: perms,
	}))
}

// RunEnded implements Recorder.
func (r *StoreRecorder) RunEnded(res *RunResult) {
	ctx := context.Background()
	r.fail(r.Store.Flush(ctx))
	r.fail(r.Store.FinishRun(ctx, res.RunID, res.Status, res.Error, res.Outputs, time.Now()))
}

// Emit implements steps.Sink: every event goes to the store's event log,
// and the spawn and teardown of each agent, and each process seen below it
// (setsid ones too), to its table of live children, which `resume` reaps
// after a crash.
func (r *StoreRecorder) Emit(e steps.Event) {
	r.Store.AppendEvent(store.Event{RunID: e.RunID, StepID: e.Step, Type: e.Type, Time: e.Time, Fields: e.Fields})
	if e.Type != "step_update" {
		return
	}
	ctx := context.Background()
	switch e.Fields["kind"] {
	case "spawned":
		pid, _ := e.Fields["pid"].(int)
		ticks, _ := e.Fields["start_ticks"].(uint64)
		r.fail(r.Store.ChildStarted(ctx, e.RunID, e.Step, pid, pid, ticks))
	case "descendant":
		pid, _ := e.Fields["pid"].(int)
		agent, _ := e.Fields["agent_pid"].(int)
		ticks, _ := e.Fields["start_ticks"].(uint64)
		r.fail(r.Store.DescendantSeen(ctx, e.RunID, e.Step, pid, agent, ticks))
	case "teardown":
		pid, _ := e.Fields["pid"].(int)
		if n, _ := e.Fields["descendants"].(int); n > 0 {
			r.fail(r.Store.GroupEnded(ctx, e.RunID, e.Step, pid))
		} else {
			r.fail(r.Store.ChildEnded(ctx, e.RunID, e.Step, pid))
		}
	}
}

// storePermission and PermissionFromStore map a permission record to the
// store's row and back: the one place that knows both shapes.
func storePermission(p policies.PermissionRecord) store.Permission {
	var locs []store.Location
	for _, l := range p.Locations {
		locs = append(locs, store.Location{Path: l.Path, Line: l.Line, InWorkspace: l.InWorkspace})
	}
	return store.Permission{
		ToolCallID: p.ToolCallID, Kind: p.Kind, Title: p.Title, Command: p.Command, Locations: locs,
		Decision: string(p.Decision), Outcome: p.Outcome, OptionID: p.OptionID, Policy: string(p.Policy), Rule: p.Rule, Reason: p.Reason,
	}
}

// PermissionFromStore is the record a stored permission row holds.
func PermissionFromStore(p store.Permission) policies.PermissionRecord {
	locs := make([]policies.ToolLocation, 0, len(p.Locations))
	for _, l := range p.Locations {
		locs = append(locs, policies.ToolLocation{Path: l.Path, Line: l.Line, InWorkspace: l.InWorkspace})
	}
	return policies.PermissionRecord{
		ToolCallID: p.ToolCallID, Kind: p.Kind, Title: p.Title, Command: p.Command, Locations: locs,
		Decision: policies.Decision(p.Decision), Outcome: p.Outcome, OptionID: p.OptionID,
		Policy: policies.Source(p.Policy), Rule: p.Rule, Reason: p.Reason,
	}
}
