// Package runs is the run service: it runs a workflow once, runs a batch
// (a run per input line, a pool of them at a time) and resumes a recorded
// run or batch, recording every run in the run store (runs/store), which
// its callers reach only through Service. Each run runs on a Backend:
// Local (engine.Run, in this process) or another (acpflow-temporal's).
//
// It sits between the commands and the engine: cmd/acpflow and
// acpflow-temporal keep flags, views and exit codes, and write --output
// with Output; a worker or a server calls this package the same way.
// Nothing here prints; what a person should be told goes to the Runner's
// hooks.
package runs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/steps"
)

// Runner runs and records the runs of one request (a command: one run, a
// batch, a resume). It keeps counts of the runs, not their results: a
// batch of any size holds only the runs in flight.
type Runner struct {
	// Store records every run and batch; nil records nothing (a backend
	// that keeps its runs itself, as Temporal does; a batch without a
	// store cannot be resumed by acpflow resume).
	Store *store.Store
	// Backend runs each run; nil: Local, in this process.
	Backend Backend
	Timeout time.Duration     // for each run; 0: none
	Ambient map[string]string // the environment runs see (env policies, `env.*`)
	// Outer is the outer policy every run decides within (the CLI's
	// --policy, $ACPFLOW_POLICY and the config files); nil: none.
	Outer policies.Outer
	// Events receives every run's events (the view). Nil drops them.
	Events steps.Sink
	// Asker puts the requests a permission policy decides to ask about to
	// a person; nil: no one (the policy's ask-fallback decides).
	Asker policies.Asker
	// Result receives each run's result as the run ends (--output). Nil
	// drops them.
	Result func(*engine.RunResult)
	// Notice receives what a person should be told that is no run's event:
	// a process reaped, a batch that stopped reading its inputs. Nil drops
	// them.
	Notice func(string)
	// BatchStarted is told a new batch's runs are about to start: total is
	// how many lines it has, or -1 for a stream, whose lines run as they
	// come. Nil: not told.
	BatchStarted func(b store.Batch, total int)
	// Budget is what a batch may spend (run --budget), its runs' usage
	// summed; zero: no limit. A resumed batch takes its recorded one
	// unless this is set.
	Budget engine.Budget
	// Traces exports each run as an OpenTelemetry trace (docs/traces.md);
	// nil: none.
	Traces *trace.Tracer

	mu                       sync.Mutex
	runs, failed, failedRuns int
	storeErrs                []error // the first maxStoreErrs
	lostErrs                 int     // how many more there were
	scratch                  string  // a private directory for the runs' files (ResolveReplays); Close removes it
	// preflighted holds the repositories and bases whose worktree
	// preflight passed (isolation.go): once per command, not per run.
	preflighted sync.Map
	// untoldSecrets holds the approvals: whose unset secret was told
	// (webhooks): once per command, not once per run of a batch.
	untoldSecrets sync.Map
}

// maxStoreErrs bounds the store errors kept for the end's warning: a store
// that fails every write would otherwise hold one per run.
const maxStoreErrs = 10

// Spec says which run to do: new, or the resumption of a recorded one.
type Spec struct {
	Inputs    map[string]any
	Workspace string                        // absolute
	RunID     string                        // minted when empty
	Done      map[string]*engine.StepResult // resume: steps that already succeeded
	Resume    bool
	BatchID   string
	BatchLine int
	// Shared is what the runs of one batch share (the agents `reuse: true`
	// keeps); nil for a lone run.
	Shared *steps.Scope
	// Meter follows the batch's budget; nil for none.
	Meter *engine.BatchMeter
}

// StateFiles are acpflow's own files that every sandbox of the Runner's
// runs denies (engine.Options.StateFiles): its store's and the state
// directory's (StateFiles).
func (r *Runner) StateFiles() []string {
	path := ""
	if r.Store != nil {
		path = r.Store.Path()
	}
	return StateFiles(path)
}

// InvalidError is a request that cannot be done as given (an invalid or
// changed workflow, inputs that do not fit it, a run another process
// owns): nothing was started for it.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

func invalid(err error) error { return &InvalidError{Err: err} }

// Run runs one run to its end on the Runner's backend, records it and
// returns its result. A run the backend could not run or await at all
// (Temporal unreachable) is told as a notice, counted failed and written
// to no Result; its result says so.
func (r *Runner) Run(ctx context.Context, wf *engine.Workflow, spec Spec) *engine.RunResult {
	var rec *Recorder
	var events steps.Sink = steps.Discard{}
	if r.Events != nil {
		events = r.Events
	}
	req := Request{Line: spec.BatchLine, Options: engine.Options{
		RunID:      spec.RunID,
		Workspace:  spec.Workspace,
		Inputs:     spec.Inputs,
		Ambient:    r.Ambient,
		Outer:      r.Outer,
		Events:     events,
		Timeout:    r.Timeout,
		Done:       spec.Done,
		Batch:      spec.Shared,
		Asker:      r.asker(wf),
		OnUsage:    onUsage(spec.Meter),
		StateFiles: r.StateFiles(),
	}}
	req.Options.BatchReached = batchReached(spec.Meter)
	if NeedsWorktrees(wf) {
		if req.RunID == "" {
			req.RunID = engine.NewRunID()
		}
		if err := r.isolate(ctx, wf, spec, &req); err != nil {
			r.notice("run %s: %s", req.RunID, err)
			res := &engine.RunResult{RunID: req.RunID, Workflow: wf.Name, Workspace: spec.Workspace, Status: engine.StatusFailed, Error: err.Error()}
			r.count(res)
			return res
		}
	}
	tr := r.traceRun(wf, spec, &req)
	if r.Store != nil {
		rec = &Recorder{
			Store: r.Store, Workflow: wf, BatchID: spec.BatchID, BatchLine: spec.BatchLine,
			Resume: spec.Resume, Owner: CurrentOwner(), TraceID: tr.TraceID(),
		}
		req.Recorder = rec
	}
	res, err := r.backend().Run(ctx, wf, req)
	defer func() { tr.End(res) }()
	if err != nil {
		if ctx.Err() == nil { // interrupted: the error is the interrupt
			r.notice("%s", err)
		}
		res = &engine.RunResult{RunID: spec.RunID, Workflow: wf.Name, Status: engine.StatusFailed, Error: err.Error()}
		r.count(res)
		return res
	}
	if rec != nil {
		if err := rec.Err(); err != nil {
			r.storeErr(fmt.Errorf("run %s: %w", res.RunID, err))
		}
	}
	r.ended(res)
	return res
}

// batchReached is the engine's budget check of a batch's meter (nil:
// none).
func batchReached(m *engine.BatchMeter) func() error {
	if m == nil {
		return nil
	}
	return m.Reached
}

// onUsage is the engine's hook for a batch's meter (nil: none).
func onUsage(m *engine.BatchMeter) func(string, *steps.Usage) {
	if m == nil {
		return nil
	}
	return m.Run
}

// ended counts a run that ended and hands its result on.
func (r *Runner) ended(res *engine.RunResult) {
	r.count(res)
	if r.Result != nil {
		r.Result(res)
	}
}

// count counts a run that ended.
func (r *Runner) count(res *engine.RunResult) {
	r.mu.Lock()
	r.runs++
	if res.Status != engine.StatusSucceeded {
		r.failed++
		r.failedRuns++
	}
	r.mu.Unlock()
}

// Runs is how many runs ended (a batch's lines that never ran among
// them) and how many of those did not succeed (unlike Failures, which
// counts what else failed too).
func (r *Runner) Runs() (ended, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs, r.failedRuns
}

// Failures is how many runs did not succeed, plus one if the store could
// not record everything (see StoreErrors): an incomplete record does not
// say everything succeeded.
func (r *Runner) Failures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// StoreErrors returns the errors of the run store kept since the last call
// (at most ten) and how many more there were.
func (r *Runner) StoreErrors() (errs []error, more int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs, more = r.storeErrs, r.lostErrs
	r.storeErrs, r.lostErrs = nil, 0
	return errs, more
}

// storeErr keeps an error of the run store for StoreErrors.
func (r *Runner) storeErr(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.storeErrs) == 0 && r.lostErrs == 0 {
		r.failed++
	}
	if len(r.storeErrs) < maxStoreErrs {
		r.storeErrs = append(r.storeErrs, err)
	} else {
		r.lostErrs++
	}
}

func (r *Runner) notice(format string, a ...any) {
	if r.Notice != nil {
		r.Notice(fmt.Sprintf(format, a...))
	}
}

// emit sends an event of the runner's own (not a run's) to Events.
func (r *Runner) emit(e steps.Event) {
	if r.Events != nil {
		r.Events.Emit(e)
	}
}

// lineEvent is the run_end event of a batch line that never ran (its
// inputs were not valid, or another process runs it), so that views count
// it.
func lineEvent(res *engine.RunResult) steps.Event {
	return steps.Event{RunID: res.RunID, Time: time.Now(),
		Data: steps.RunEnd{Status: string(res.Status), Error: res.Error, Invalid: true}}
}

// StoreOpenErr is why the run store could not be opened (OpenAsync), once
// that is known; nil without a store.
func (r *Runner) StoreOpenErr() error {
	if r.Store == nil {
		return nil
	}
	return r.Store.OpenErr()
}
