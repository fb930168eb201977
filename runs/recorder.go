package runs

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
)

// Recorder keeps a run in the run store as it happens: the engine's
// Recorder, over store.Store.
type Recorder struct {
	Store *store.Store
	// Workflow is the workflow being run, for its file and hash.
	Workflow *engine.Workflow
	// BatchID and BatchLine place the run in a batch; empty and 0 otherwise.
	BatchID   string
	BatchLine int
	// Resume makes RunStarted reopen the run instead of creating it.
	Resume bool
	// Owner is the acpflow process running it.
	Owner store.Owner
	// TraceID is the trace the run exports (runs/trace); "": none.
	TraceID string

	mu      sync.Mutex
	err     error
	started map[string]time.Time // step id → when its first attempt started
}

var _ engine.Recorder = (*Recorder)(nil)

// Err is the first error the store returned, if any: the run went on, but
// its record is incomplete.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) fail(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// queued is the context of the writes a run does not wait for (see
// store.Queued): their errors go where the others' do.
func (r *Recorder) queued() context.Context {
	return store.Queued(context.Background(), r.fail)
}

// RunStarted implements engine.Recorder. The run's record is queued, not
// waited for: the step's agent starts meanwhile, and its process is on
// record, after the run, before the step talks to it (children.Started).
func (r *Recorder) RunStarted(res *engine.RunResult) {
	ctx := r.queued()
	r.mu.Lock()
	r.started = map[string]time.Time{}
	r.mu.Unlock()
	if r.Resume {
		r.fail(r.Store.ReopenRun(ctx, res.RunID, r.Owner.PID, r.Owner.StartTicks))
		if r.TraceID != "" {
			r.fail(r.Store.SetRunTrace(ctx, res.RunID, r.TraceID))
		}
		return
	}
	r.fail(r.Store.CreateRun(ctx, store.Run{
		ID: res.RunID, BatchID: r.BatchID, BatchLine: r.BatchLine,
		Workflow: r.Workflow.Name, WorkflowFile: r.Workflow.File, WorkflowHash: r.Workflow.Hash,
		Workspace: res.Workspace, Inputs: res.Inputs, StartedAt: res.StartedAt,
		OwnerPID: r.Owner.PID, OwnerStartTicks: r.Owner.StartTicks, TraceID: r.TraceID,
	}))
	if res.Worktree != nil {
		// Made before the run started: recorded with it.
		r.fail(r.Store.SetRunWorktrees(ctx, res.RunID, []*engine.Worktree{res.Worktree}))
	}
}

// StepStarted implements engine.Recorder.
func (r *Recorder) StepStarted(runID, stepID string, ord, attempt int) {
	now := time.Now()
	r.mu.Lock()
	if _, ok := r.started[stepID]; !ok {
		r.started[stepID] = now
	}
	began := r.started[stepID]
	r.mu.Unlock()
	r.fail(r.Store.SaveStep(r.queued(), store.Step{
		RunID: runID, StepID: stepID, Ord: ord, Status: engine.StatusRunning, Attempts: attempt, StartedAt: began,
	}))
}

// StepEnded implements engine.Recorder.
func (r *Recorder) StepEnded(runID, stepID string, ord int, res *engine.StepResult) {
	now := time.Now()
	r.mu.Lock()
	began, ok := r.started[stepID]
	r.mu.Unlock()
	if !ok {
		began = now
	}
	r.fail(r.Store.SaveStep(context.Background(), StepRecord(runID, stepID, ord, res, began, now)))
}

// StepTranscript implements engine.Recorder.
func (r *Recorder) StepTranscript(runID string, t *transcript.Step) {
	r.fail(r.Store.SaveTranscript(r.queued(), runID, t))
}

// RunEnded implements engine.Recorder.
func (r *Recorder) RunEnded(res *engine.RunResult) {
	ctx := context.Background()
	r.fail(r.Store.Flush(ctx))
	if res.Usage != nil {
		r.fail(r.Store.SetRunUsage(ctx, res.RunID, res.Usage))
	}
	// The end is the result's (its start and duration), so that the
	// record's duration is the one the result says (ResultOf rebuilds it).
	ended := res.StartedAt.Add(time.Duration(res.DurationMS) * time.Millisecond)
	r.fail(r.Store.FinishRun(ctx, res.RunID, res.Status, res.Error, res.Outputs, ended, res.OutputNames...))
}

// Emit implements steps.Sink: every event goes to the store's event log.
func (r *Recorder) Emit(e steps.Event) {
	fields, err := e.FieldsJSON()
	if err != nil {
		fields, _ = json.Marshal(map[string]string{"store_error": "fields not encodable: " + err.Error()})
	}
	r.Store.AppendEvent(store.Event{RunID: e.RunID, StepID: e.Step, Type: e.Type(), Time: e.Time, FieldsJSON: fields})
}

// Processes implements engine.Recorder: a step's processes go to the run
// store's table of children as they start, are seen and end, so that
// resume can reap what a crash left (see Runner.ResumeRun).
func (r *Recorder) Processes(runID, stepID string) steps.Processes {
	return &children{rec: r, runID: runID, stepID: stepID}
}

// children records one step's processes in the store's children table.
type children struct {
	rec           *Recorder
	runID, stepID string
}

var _ steps.Processes = (*children)(nil)

// Started waits until the process is on record, and with it every write
// queued before (the run, the step): a step drives no process the store
// could not record (steps.Processes). Its error is the run's too.
func (c *children) Started(pid int, startTicks uint64) error {
	err := c.rec.Store.ChildStarted(context.Background(), c.runID, c.stepID, pid, pid, startTicks)
	c.rec.fail(err)
	return err
}

func (c *children) Seen(agentPID, pid int, startTicks uint64) {
	c.rec.fail(c.rec.Store.DescendantSeen(c.rec.queued(), c.runID, c.stepID, pid, agentPID, startTicks))
}

// Ended marks the process's row ended, and with descendants seen below
// it, every row of its group (the agent's pid is their pgid).
func (c *children) Ended(pid, descendants int) {
	if descendants > 0 {
		c.rec.fail(c.rec.Store.GroupEnded(c.rec.queued(), c.runID, c.stepID, pid))
		return
	}
	c.rec.fail(c.rec.Store.ChildEnded(c.rec.queued(), c.runID, c.stepID, pid))
}
