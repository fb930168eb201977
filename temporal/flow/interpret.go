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
	if err := s.approvals.keep(ctx); err != nil {
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
	// A run a release before the one schedule started replays as that
	// release scheduled it (legacy.go).
	if workflow.GetVersion(ctx, oneScheduleChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		l := &legacyRun{scheduler: s}
		l.run(ctx)
		out.Status, out.Error = l.end(ctx)
	} else {
		s.run(ctx)
		out.Status, out.Error = s.sched.End()
	}
	// The end is computed as the CLI computes it, after a cancellation
	// too: on a context the cancellation does not reach.
	end, _ := workflow.NewDisconnectedContext(ctx)
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

// scheduler is one run's state in the workflow: it drives the run's
// engine.Schedule (the same scheduling as the CLI's) with coroutines,
// activities and workflow timers.
type scheduler struct {
	in        *Interpreter
	req       Request
	wf        *engine.Workflow
	sched     *engine.Schedule
	results   map[string]*engine.StepResult // settled steps, loaded
	stored    map[string]Stored             // the same, as payloads
	cause     string                        // why the run stopped starting steps; "": it did not
	scheduled int                           // attempts scheduled as activities, against maxAttempts
	root      workflow.Context
	events    [][]byte // as EventsQuery answers them
	// turnEnd: the run's attempts signal their turn's end (turnEndChange).
	turnEnd bool
	// approvals are the asks of the run's steps put to people.
	approvals approvalBook
}

// emit keeps an event of the run for EventsQuery.
func (s *scheduler) emit(step string, d steps.EventData) { s.emitAt(step, nil, d) }

// emitAt keeps an event of step's for-each element el (nil: of the step,
// or of the run), with its index, as the CLI emits it.
func (s *scheduler) emitAt(step string, el *engine.Element, d steps.EventData) {
	line, err := json.Marshal(steps.Event{RunID: s.req.RunID, Step: step, Index: engine.Index(el), Time: workflow.Now(s.root), Data: d})
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

// oneScheduleChange marks, in a run's history, that the run is scheduled
// by engine.Schedule; a history without it is a legacyRun's.
const oneScheduleChange = "acpflow.one-schedule"

// turnEndChange marks, in a run's history, that the run's attempts
// signal their turn's end (TurnEndSignal), which settles the step, and
// free their slot when their activity completes; without it both came
// with the activity's completion, after teardown.
const turnEndChange = "acpflow.turn-end"

// turn is an attempt in flight, by turnKey: whether its turn's end was
// fed to the schedule (by TurnEndSignal or by the activity's completion).
type turn struct {
	a     *engine.StartAttempt
	ended bool
}

// turnKey names an attempt of a run: step, element index (-1: none),
// attempt number.
type turnKey struct {
	step     string
	index, n int
}

func keyOf(step string, index *int, n int) turnKey {
	k := turnKey{step: step, index: -1, n: n}
	if index != nil {
		k.index = *index
	}
	return k
}

func indexOf(el *engine.Element) *int {
	if el == nil {
		return nil
	}
	return &el.Index
}

// happened is what a coroutine reports to the run's loop: it feeds the
// schedule and returns what to do next.
type happened func(now time.Time) []engine.Action

// run drives the schedule until every step has settled: an attempt is an
// activity in a coroutine, a wait between attempts a workflow timer, and a
// cancelled workflow or the run's timeout a stop. An attempt's turn ends
// when its activity signals so (TurnEndSignal; or, from a worker that did
// not, when the activity completes), and its slot is free when the
// activity completes, its agents gone; the run ends once every activity
// has. Only this loop feeds the schedule.
func (s *scheduler) run(ctx workflow.Context) {
	s.turnEnd = workflow.GetVersion(ctx, turnEndChange, workflow.DefaultVersion, 1) == 1
	runCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	s.sched = engine.NewSchedule(s.wf, engine.ScopeOf{
		RunID: s.req.RunID, Workspace: s.req.Workspace, Inputs: s.req.Inputs, Env: s.req.Env, Results: s.results,
	}, engine.FirstBackoff)
	recv, _ := workflow.NewDisconnectedContext(ctx)
	ch := workflow.NewChannel(recv)
	stop := func(st engine.Stop) happened {
		return func(now time.Time) []engine.Action {
			if s.sched.Done() {
				// Every step settled; only teardowns go on, and the run's
				// end is decided: they are cut short, nothing else.
				cancel()
				return nil
			}
			if s.cause == "" {
				s.cause = st.Cause
			}
			cancel()
			return s.sched.Stop(st, now)
		}
	}
	if s.req.Timeout > 0 {
		workflow.Go(runCtx, func(c workflow.Context) {
			if workflow.NewTimer(c, s.req.Timeout).Get(c, nil) == nil {
				msg := fmt.Sprintf("run timed out after %s", s.req.Timeout)
				ch.Send(c, stop(engine.Stop{Cause: msg, Status: engine.StatusFailed, Error: msg}))
			}
		})
	}
	workflow.Go(recv, func(c workflow.Context) {
		ctx.Done().Receive(c, nil) // the workflow was cancelled
		ch.Send(c, stop(engine.Stop{Cause: "cancelled", Status: engine.StatusCancelled, Error: "cancelled"}))
	})
	turns := map[turnKey]*turn{}
	if s.turnEnd {
		s.listenTurnEnds(recv, ch, turns)
	}
	acts := s.sched.Start(workflow.Now(ctx))
	for {
		s.perform(runCtx, ch, turns, acts, cancel)
		if s.sched.Done() && len(turns) == 0 {
			return
		}
		var f happened
		ch.Receive(recv, &f)
		acts = f(workflow.Now(ctx))
	}
}

// listenTurnEnds feeds each TurnEnd signal to the loop: the turn it names
// ends with the result it carries, unless its end was fed already.
func (s *scheduler) listenTurnEnds(recv workflow.Context, ch workflow.Channel, turns map[turnKey]*turn) {
	signals := workflow.GetSignalChannel(recv, TurnEndSignal)
	workflow.Go(recv, func(c workflow.Context) {
		for {
			var te TurnEnd
			signals.Receive(c, &te)
			ch.Send(c, happened(func(now time.Time) []engine.Action {
				// A signal of an attempt whose end was fed already (a
				// worker ran it again after signalling) changes nothing;
				// one whose result cannot be read is left to the
				// activity's completion.
				t := turns[keyOf(te.Step, te.Index, te.Attempt)]
				if t == nil || t.ended {
					return nil
				}
				res, err := s.load(te.Result)
				if err != nil {
					return nil
				}
				t.ended = true
				return s.sched.Ended(t.a, res, now)
			}))
		}
	})
}

// perform carries out the schedule's actions in order: an attempt becomes an
// activity in a coroutine, a wait a timer, and a settled step or element is
// recorded; what they report comes back to the loop through ch.
func (s *scheduler) perform(runCtx workflow.Context, ch workflow.Channel, turns map[turnKey]*turn, acts []engine.Action, cancel workflow.CancelFunc) {
	for _, a := range acts {
		switch a := a.(type) {
		case *engine.StartAttempt:
			s.emitAt(a.Step.ID, a.Element, a.StepStart())
			key := keyOf(a.Step.ID, indexOf(a.Element), a.N)
			t := &turn{a: a}
			turns[key] = t
			workflow.Go(runCtx, func(c workflow.Context) {
				res, err := s.attempt(c, a.Step, a.Element, a.N)
				if err != nil {
					res = engine.Errored(err.Error())
				}
				// The activity returns once the agents are gone: the
				// slot is free, and the turn ended if no signal said so.
				ch.Send(c, happened(func(now time.Time) []engine.Action {
					var acts []engine.Action
					if !t.ended {
						t.ended = true
						acts = s.sched.Ended(a, res, now)
					}
					delete(turns, key)
					s.approvals.withdraw(key)
					return append(acts, s.sched.Released(a, now)...)
				}))
			})
		case *engine.Wait:
			s.emitAt(a.Step.ID, a.Element, steps.Retry{AfterMS: a.After.Milliseconds(), Error: a.Error})
			workflow.Go(runCtx, func(c workflow.Context) {
				workflow.Sleep(c, a.After) // cancelled: the schedule has ended the wait already
				ch.Send(c, happened(func(now time.Time) []engine.Action { return s.sched.Woke(a, now) }))
			})
		case *engine.ElementDone:
			s.emitAt(a.Step.ID, a.Element, a.ElementEnd())
		case *engine.Settle:
			s.settle(a.Step, a.Result)
		case *engine.Cancel:
			if s.cause == "" {
				s.cause = a.Cause
			}
			cancel()
		}
	}
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
		Workspace: s.req.Workspace, Inputs: s.req.Inputs, Settled: s.ancestors(st), TurnEnd: s.turnEnd,
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
	return s.load(stored)
}

// load is an attempt's result as its worker stored it; a cancelled one
// says why the run cancelled it.
func (s *scheduler) load(stored Stored) (*engine.StepResult, error) {
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
func (s *scheduler) spent() *steps.Usage { return s.wf.Spent(s.results) }

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
