package flow

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Names under which the workflow, the activity and the workflow's query
// are registered.
const (
	WorkflowName = "acpflow.run"
	ActivityName = "acpflow.attempt"
	// EventsQuery answers a run's events from an index on (an int): each
	// a JSON line as `acpflow run --json` prints it (run_start,
	// step_start, step_update of kind retry, step_end, run_end). What
	// happens inside a turn (messages, tool calls) stays on the worker.
	EventsQuery = "acpflow.events"
)

// Request is one acpflow run, as the workflow's input. It holds no secret:
// Env holds only the variables the plan's expressions name (see EnvFor).
type Request struct {
	RunID     string
	Bundle    Bundle
	Plan      Plan
	Workspace string
	Inputs    map[string]any
	Env       map[string]string `json:",omitempty"`
	// Done holds the steps that succeeded in an earlier execution of the
	// run (a re-submitted run): they are not run again.
	Done    map[string]Stored `json:",omitempty"`
	Timeout time.Duration     `json:",omitempty"` // the whole run; 0: none
	// Heartbeat is how long a worker may go without a heartbeat before its
	// attempt is given to another worker; 0: DefaultHeartbeat.
	Heartbeat time.Duration `json:",omitempty"`
}

// DefaultHeartbeat is the heartbeat timeout of an attempt: a worker that
// dies is noticed this long after its last heartbeat (it beats at a
// quarter of it).
const DefaultHeartbeat = 20 * time.Second

// workerRetries is how often an attempt is given to a worker again when
// the worker, not the step, failed (it died, lost the server): a step's
// own failure is a result, retried only by its `retries:`.
const workerRetries = 5

// Outcome is a run's end, as the workflow's result: the CLI's result
// (engine.RunResult) with each step's result stored.
type Outcome struct {
	RunID      string
	Workflow   string
	Status     engine.Status
	Error      string `json:",omitempty"`
	Inputs     map[string]any
	Outputs    map[string]any
	StartedAt  time.Time
	DurationMS int64
	Usage      *engine.RunUsage `json:",omitempty"`
	Steps      map[string]Stored
}

// Interpreter is the generic Temporal workflow: it runs any acpflow
// workflow's Plan.
type Interpreter struct{ Blobs Blobs }

// Interpret runs one acpflow run to its end. It returns an error only for
// what Temporal must retry; a run that fails is an Outcome that says so.
func (in *Interpreter) Interpret(ctx workflow.Context, req Request) (*Outcome, error) {
	out := &Outcome{
		RunID: req.RunID, Workflow: req.Plan.Name, StartedAt: workflow.Now(ctx),
		Inputs: req.Inputs, Outputs: map[string]any{}, Steps: map[string]Stored{},
	}
	wf, err := req.Plan.workflow()
	if err != nil {
		out.Status, out.Error = engine.StatusFailed, err.Error()
		return out, nil
	}
	s := &scheduler{in: in, req: req, wf: wf, results: map[string]*engine.StepResult{}, stored: out.Steps, root: ctx}
	if err := workflow.SetQueryHandler(ctx, EventsQuery, s.eventsFrom); err != nil {
		return nil, err
	}
	ids := make([]string, len(wf.Steps))
	for i, st := range wf.Steps {
		ids[i] = st.ID
	}
	s.emit("", steps.RunStart{Workflow: wf.Name, Workspace: req.Workspace, Steps: ids})
	for id, st := range req.Done {
		res, err := in.Blobs.Load(st)
		if err != nil {
			return nil, err
		}
		s.results[id], s.stored[id] = res, st
	}
	s.run(ctx)
	// The end is computed as the CLI computes it, after a cancellation
	// too: on a context the cancellation does not reach.
	end, _ := workflow.NewDisconnectedContext(ctx)
	out.Status = engine.StatusSucceeded
	for _, st := range wf.Steps {
		if res := s.results[st.ID]; res != nil && res.Status == engine.StatusFailed && !st.ContinueOnError {
			out.Status = engine.StatusFailed
		}
	}
	switch {
	case ctx.Err() != nil:
		out.Status, out.Error = engine.StatusCancelled, "cancelled"
	case s.timedOut:
		out.Status, out.Error = engine.StatusFailed, fmt.Sprintf("run timed out after %s", req.Timeout)
	case s.overBudget != nil:
		out.Status, out.Error = engine.StatusFailed, s.overBudget.Error()
	}
	if out.Status == engine.StatusSucceeded {
		if err := wf.RenderOutputs(s.scope(nil), out.Outputs); err != nil {
			out.Status, out.Error = engine.StatusFailed, err.Error()
		}
	}
	out.Usage = wf.Usage(s.results)
	if err := in.Blobs.shrink(out.Steps); err != nil {
		return nil, err
	}
	out.DurationMS = workflow.Now(end).Sub(out.StartedAt).Milliseconds()
	runEnd := steps.RunEnd{Status: string(out.Status), DurationMS: out.DurationMS, Error: out.Error}
	if out.Usage != nil {
		runEnd.Usage = &out.Usage.Usage
	}
	s.emit("", runEnd)
	return out, nil
}

// scheduler is one run's state in the workflow.
type scheduler struct {
	in         *Interpreter
	req        Request
	wf         *engine.Workflow
	results    map[string]*engine.StepResult // settled steps, loaded
	stored     map[string]Stored             // the same, as payloads
	cause      string                        // why the run stopped starting steps; "": it did not
	timedOut   bool
	overBudget error // the budget's error, once the settled steps spent more
	scheduled  int   // attempts scheduled as activities, against maxAttempts
	root       workflow.Context
	events     [][]byte // as EventsQuery answers them
}

// emit keeps an event of the run for EventsQuery.
func (s *scheduler) emit(step string, d steps.EventData) {
	line, err := json.Marshal(steps.Event{RunID: s.req.RunID, Step: step, Time: workflow.Now(s.root), Data: d})
	if err == nil {
		s.events = append(s.events, line)
	}
}

// MaxEventsPerQuery bounds one answer of EventsQuery, so that a run of
// thousands of attempts does not answer one query past gRPC's message
// limit: ask again from where the answer ended.
const MaxEventsPerQuery = 500

// eventsFrom answers EventsQuery: the events from index from on, at most
// MaxEventsPerQuery of them.
func (s *scheduler) eventsFrom(from int) ([]json.RawMessage, error) {
	if from < 0 || from > len(s.events) {
		return nil, fmt.Errorf("no event %d: the run has %d", from, len(s.events))
	}
	to := min(len(s.events), from+MaxEventsPerQuery)
	out := make([]json.RawMessage, 0, to-from)
	for _, e := range s.events[from:to] {
		out = append(out, e)
	}
	return out, nil
}

// settled is a step's end, sent by the coroutine that ran it.
type settled struct {
	id  string
	res *engine.StepResult
	err error
}

// run starts each step once its needs have settled, at most MaxParallel
// at once, until every step has settled. A step that fails (without
// continue-on-error) cancels the others, as on the CLI.
func (s *scheduler) run(ctx workflow.Context) {
	runCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	if s.req.Timeout > 0 {
		workflow.Go(runCtx, func(c workflow.Context) {
			if workflow.NewTimer(c, s.req.Timeout).Get(c, nil) == nil {
				s.timedOut, s.cause = true, fmt.Sprintf("run timed out after %s", s.req.Timeout)
				cancel()
			}
		})
	}
	recv, _ := workflow.NewDisconnectedContext(ctx)
	ch := workflow.NewChannel(recv)
	started := map[string]bool{}
	for id := range s.results {
		started[id] = true
	}
	running := 0
	for {
		for progress := true; progress; {
			progress = false
			for _, st := range s.wf.Steps {
				if started[st.ID] || !s.needsSettled(st) || running >= s.wf.MaxParallel {
					continue
				}
				started[st.ID], progress = true, true
				if res := s.wf.Unrun(st, s.results, func() *engine.Scope { return s.scope(nil) }, s.stopping(runCtx)); res != nil {
					s.settle(st, res)
					if res.Status == engine.StatusFailed {
						s.failed(st, cancel)
					}
					continue
				}
				running++
				workflow.Go(runCtx, func(c workflow.Context) {
					res, err := s.runStep(c, st)
					ch.Send(recv, settled{id: st.ID, res: res, err: err})
				})
			}
		}
		if running == 0 {
			return
		}
		var d settled
		ch.Receive(recv, &d)
		running--
		st := s.wf.Step(d.id)
		if d.err != nil {
			d.res = engine.Errored(d.err.Error())
		}
		s.settle(st, d.res)
		if d.res.Status == engine.StatusFailed {
			s.failed(st, cancel)
		}
		if err := s.wf.Budget.Check("", s.spent()); err != nil && s.overBudget == nil {
			// As on the CLI: what runs is cancelled, nothing new starts.
			s.overBudget, s.cause = err, err.Error()
			cancel()
		}
	}
}

// failed stops the run from starting steps, and cancels those running,
// when st may not fail alone.
func (s *scheduler) failed(st *engine.Step, cancel workflow.CancelFunc) {
	if st.ContinueOnError {
		return
	}
	if s.cause == "" {
		s.cause = "cancelled: another step failed"
	}
	cancel()
}

// stopping is why the run starts no more steps, "" while it goes on.
func (s *scheduler) stopping(runCtx workflow.Context) string {
	switch {
	case runCtx.Err() == nil:
		return ""
	case s.cause != "":
		return s.cause
	}
	return "cancelled"
}

func (s *scheduler) needsSettled(st *engine.Step) bool {
	for _, n := range st.Needs {
		if s.results[n] == nil {
			return false
		}
	}
	return true
}

// settle keeps a step's result, inline or by reference.
func (s *scheduler) settle(st *engine.Step, res *engine.StepResult) {
	stored, err := s.in.Blobs.store(res)
	if err != nil {
		// The result cannot be kept by reference: keep it inline, and let
		// Temporal say if it is too large.
		stored = Stored{Result: res}
	}
	s.results[st.ID], s.stored[st.ID] = res, stored
	s.emit(st.ID, steps.StepEnd{Status: string(res.Status), StopReason: res.StopReason, Attempts: res.Attempts, DurationMS: res.DurationMS, Error: res.Error, Usage: res.Usage})
}

// scope is what the run's expressions see, as on the CLI; env holds only
// what the request carries.
func (s *scheduler) scope(el *engine.Element) *engine.Scope {
	return s.wf.Scope(engine.ScopeOf{
		RunID: s.req.RunID, Workspace: s.req.Workspace, Inputs: s.req.Inputs, Env: s.req.Env, Results: s.results,
	}, el)
}

// runStep runs a step with its retries, or its for-each elements.
func (s *scheduler) runStep(ctx workflow.Context, st *engine.Step) (*engine.StepResult, error) {
	begin := workflow.Now(ctx)
	var res *engine.StepResult
	if st.ForEach == nil {
		var err error
		if res, err = s.attempts(ctx, st, nil); err != nil {
			return nil, err
		}
	} else {
		items, err := st.Items(s.scope(nil))
		if err != nil {
			return engine.Errored(err.Error()), nil
		}
		limit := st.ForEachMaxParallel
		if limit <= 0 {
			limit = len(items)
		}
		each := make([]*engine.StepResult, len(items))
		errs := make([]error, len(items))
		slots := workflow.NewBufferedChannel(ctx, max(limit, 1))
		wg := workflow.NewWaitGroup(ctx)
		for i, item := range items {
			wg.Add(1)
			workflow.Go(ctx, func(c workflow.Context) {
				defer wg.Done()
				slots.Send(c, true)
				defer slots.Receive(c, nil)
				each[i], errs[i] = s.attempts(c, st, &engine.Element{Item: item, Index: i})
			})
		}
		wg.Wait(ctx)
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		res = st.Combine(each)
	}
	res.DurationMS = workflow.Now(ctx).Sub(begin).Milliseconds()
	return res, nil
}

// attempts runs one step (or element) until it succeeds or its retries
// are spent: each attempt is an activity, and the waits between them are
// the CLI's.
func (s *scheduler) attempts(ctx workflow.Context, st *engine.Step, el *engine.Element) (*engine.StepResult, error) {
	total := &engine.StepResult{Permissions: []policies.PermissionRecord{}}
	backoff := engine.FirstBackoff
	for attempt := 1; ; attempt++ {
		start := steps.StepStart{Attempt: attempt}
		if el != nil {
			index := el.Index
			start.Index = &index
		}
		s.emit(st.ID, start)
		res, err := s.attempt(ctx, st, el, attempt)
		if err != nil {
			return nil, err
		}
		total.AddAttempt(res)
		total.Attempts = attempt
		switch {
		case res.Status == engine.StatusSucceeded || res.Status == engine.StatusCancelled:
			return total, nil
		case ctx.Err() != nil:
			total.Status = engine.StatusCancelled
			return total, nil
		case attempt > st.Retries:
			total.Status = engine.StatusFailed
			return total, nil
		}
		s.emit(st.ID, steps.Retry{AfterMS: backoff.Milliseconds(), Error: res.Error})
		if workflow.Sleep(ctx, backoff) != nil {
			total.Status = engine.StatusCancelled
			return total, nil
		}
		backoff = engine.NextBackoff(backoff)
	}
}

// maxAttempts bounds the attempts of one run on Temporal: each is three
// events or more of its history, which Temporal ends at 51,200 events. An
// attempt past it fails, saying so, rather than the whole run being
// terminated by Temporal; a larger job is a batch (--inputs) of runs.
var maxAttempts = 10_000

// attempt runs one attempt as an activity. A step timeout is the step's
// own (the attempt fails with it, as on the CLI); the activity's limit is
// that plus time to tear down, and a worker that stops heartbeating has
// its attempt given to another.
func (s *scheduler) attempt(ctx workflow.Context, st *engine.Step, el *engine.Element, n int) (*engine.StepResult, error) {
	heartbeat := s.req.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	limit := 24 * time.Hour
	if st.Timeout > 0 {
		limit = st.Timeout + time.Minute
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: limit,
		HeartbeatTimeout:    heartbeat,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: workerRetries, NonRetryableErrorTypes: []string{badTask},
		},
	})
	task := Task{
		RunID: s.req.RunID, Bundle: s.req.Bundle, Step: st.ID, Element: el, Attempt: n,
		Workspace: s.req.Workspace, Inputs: s.req.Inputs, Settled: s.ancestors(st),
	}
	if !s.wf.Budget.IsZero() {
		task.Spent = s.spent()
	}
	if s.scheduled >= maxAttempts {
		return engine.Errored(fmt.Sprintf("the run has made %d attempts, as many as a run on Temporal may (its history would outgrow Temporal's limit): split the work into runs of a batch (--inputs)", maxAttempts)), nil
	}
	s.scheduled++
	if err := s.in.Blobs.shrink(task.Settled); err != nil {
		return nil, err
	}
	var stored Stored
	err := workflow.ExecuteActivity(actx, ActivityName, task).Get(actx, &stored)
	switch {
	case err != nil && ctx.Err() != nil:
		cause := s.cause
		if cause == "" {
			cause = "cancelled"
		}
		return &engine.StepResult{Status: engine.StatusCancelled, StopReason: string(steps.Aborted), Output: "", Final: "", Error: cause, Permissions: []policies.PermissionRecord{}}, nil
	case err != nil:
		return engine.Errored("the worker failed the attempt: " + err.Error()), nil
	}
	res, err := s.in.Blobs.Load(stored)
	if err == nil && res.Status == engine.StatusCancelled && res.Error == "" {
		res.Error = s.cause
		if res.Error == "" {
			res.Error = "cancelled"
		}
	}
	return res, err
}

// spent is what the settled steps spent, as a budget counts it (nil:
// nothing reported).
func (s *scheduler) spent() *steps.Usage {
	u := s.wf.Usage(s.results)
	if u == nil {
		return nil
	}
	t := u.Usage.Clone()
	t.ContextTokens, t.ContextSize = nil, nil
	return t
}

// ancestors are the settled results a step's templates may read: those of
// the steps it needs, directly or not.
func (s *scheduler) ancestors(st *engine.Step) map[string]Stored {
	out := map[string]Stored{}
	var walk func(st *engine.Step)
	walk = func(st *engine.Step) {
		for _, n := range st.Needs {
			if _, seen := out[n]; !seen {
				out[n] = s.stored[n]
				walk(s.wf.Step(n))
			}
		}
	}
	walk(st)
	return out
}
