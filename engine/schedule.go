package engine

import (
	"fmt"
	"runtime"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Schedule is one run's scheduling as a deterministic state machine: the
// DAG along `needs`, `if:`, for-each fan-out, retries and the waits between
// them, max-parallel, a failing step stopping the run, and the budget at
// each settle. It starts nothing, waits for nothing and reads no clock: a
// driver tells it what happened (Ended, Released, Woke, Stop, each with the
// time it happened) and does what it answers. Run drives it with
// goroutines and timers; the Temporal interpreter with coroutines,
// activities and workflow timers. So a workflow is scheduled one way,
// whichever backend runs it.
//
// A Schedule is not safe for concurrent use: a driver feeds it from one
// loop.
type Schedule struct {
	wf      *Workflow
	of      ScopeOf // Results holds the settled steps
	limit   int
	backoff time.Duration
	runs    map[string]*stepRun // steps that need no more than a slot, or started
	held    int                 // run slots held

	now        time.Time // the time the driver last gave
	stop       *Stop     // why no new step starts; nil while the run goes on
	end        *Stop     // what ends the run: the first stop, or an interrupt that came later
	stepFailed bool      // a step failed without continue-on-error
}

// Action is what a Schedule asks its driver to do: *StartAttempt, *Wait,
// *ElementDone, *Settle or *Cancel, in the order given.
type Action interface{ isAction() }

// StartAttempt asks the driver to run attempt N (from 1) of Step, of its
// for-each element Element (nil for a step without for-each): emit
// step_start, run it, then report Ended when its turn ends and Released
// when its agents are gone.
type StartAttempt struct {
	Step    *Step
	Element *Element
	N       int
	// Elements is how many elements the for-each has; 0 for a step
	// without one.
	Elements int
}

// StepStart is the step_start event a driver emits for a.
func (a *StartAttempt) StepStart() steps.StepStart {
	ev := steps.StepStart{Attempt: a.N}
	if a.Element != nil {
		index := a.Element.Index
		ev.Index, ev.Elements, ev.Item = &index, a.Elements, steps.ItemJSON(a.Element.Item)
	}
	return ev
}

// Wait asks the driver to wait After, then report Woke. It comes between a
// failed attempt and the next (N); Error is why the last one failed, for
// the `retry` event.
type Wait struct {
	Step    *Step
	Element *Element
	N       int
	After   time.Duration
	Error   string
}

// ElementDone says that a for-each element is done (its last attempt
// ended, or the run stopped while it waited to retry): the driver emits
// the element_end event, with the element's index.
type ElementDone struct {
	Step    *Step
	Element *Element
	Result  *StepResult
	// DurationMS is from the element's first attempt's start.
	DurationMS int64
}

// ElementEnd is the element_end event a driver emits for a.
func (a *ElementDone) ElementEnd() steps.ElementEnd {
	return steps.ElementEnd{Status: string(a.Result.Status), StopReason: a.Result.StopReason, Attempts: a.Result.Attempts,
		DurationMS: a.DurationMS, Error: a.Result.Error}
}

// Index is the element's index, for the event's envelope; nil when el is
// nil (a step without for-each).
func Index(el *Element) *int {
	if el == nil {
		return nil
	}
	i := el.Index
	return &i
}

// Settle gives a step's final result: the driver records it (durably,
// before anything depends on it) and emits step_end.
type Settle struct {
	Step   *Step
	Result *StepResult
}

// Cancel asks the driver to cancel every attempt in flight with Cause: a
// step failed, or the run spent its budget. A stop the driver saw first
// (Stop) it has cancelled already.
type Cancel struct{ Cause string }

func (*StartAttempt) isAction() {}
func (*Wait) isAction()         {}
func (*ElementDone) isAction()  {}
func (*Settle) isAction()       {}
func (*Cancel) isAction()       {}

// Stop is why a run stops starting steps: the steps in flight are
// cancelled with Cause, those not started are skipped with it.
type Stop struct {
	Cause string
	// Status is the run's end it makes: StatusCancelled (interrupted) or
	// StatusFailed (a timeout, the budget, a failed step).
	Status Status
	// Error is the run's error, "" for a failed step (whose own error
	// says why).
	Error string
}

// stepRun is a step from the moment its needs settled and it is to run.
type stepRun struct {
	st      *Step
	started bool // holds a run slot
	begin   time.Time
	items   []any // for-each; nil otherwise
	listErr error // why the for-each's list could not be had
	elems   []*elemRun
	live    int // elements holding one of the step's for-each slots
	settled bool
}

// elemRun is one element of a for-each step, or the whole of another step.
type elemRun struct {
	el       *Element  // nil for a step without for-each
	begin    time.Time // its first attempt's start
	res      *StepResult
	n        int // attempts started
	inFlight int // attempts started whose agents are not gone
	backoff  time.Duration
	waiting  bool // between two attempts
	done     bool // res is final
}

// DefaultMaxParallel is max-parallel for a workflow that sets none: the
// number of CPUs (SPEC) of the machine that loads it. The loader settles
// it into Workflow.MaxParallel, so a run is scheduled alike whichever
// backend drives it, and a Temporal run by the submitter's count, not a
// worker's.
func DefaultMaxParallel() int { return runtime.NumCPU() }

// NewSchedule schedules a run of wf. of.Results holds the steps that
// succeeded in an earlier attempt at the run (resume): they do not run
// again. backoff is the first wait between attempts (0: FirstBackoff).
// A workflow not from the loader with no MaxParallel gets
// DefaultMaxParallel.
func NewSchedule(wf *Workflow, of ScopeOf, backoff time.Duration) *Schedule {
	if backoff <= 0 {
		backoff = FirstBackoff
	}
	// Only the workflow's own steps count: Done compares the two lengths.
	results := make(map[string]*StepResult, len(wf.Steps))
	for _, st := range wf.Steps {
		if res := of.Results[st.ID]; res != nil {
			results[st.ID] = res
		}
	}
	of.Results = results
	limit := wf.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel()
	}
	return &Schedule{wf: wf, of: of, limit: limit, backoff: backoff, runs: map[string]*stepRun{}}
}

// Start is what to do first.
func (s *Schedule) Start(now time.Time) []Action { s.now = now; return s.advance(now, nil) }

// Done reports whether every step has settled. Agents may still be going
// (Released not yet reported); the run ends once they are gone.
func (s *Schedule) Done() bool { return len(s.of.Results) == len(s.wf.Steps) }

// Results are the settled steps' results, by id; the caller must not
// change them.
func (s *Schedule) Results() map[string]*StepResult { return s.of.Results }

// Scope is what expressions see now: the run, its inputs and env, the
// steps settled so far, and el's item and index (nil: none).
func (s *Schedule) Scope(el *Element) *Scope { return s.wf.Scope(s.of, el) }

// End is the run's status and error once Done, as the steps and the stop
// made it (outputs and the store's health are the driver's to add).
func (s *Schedule) End() (Status, string) {
	switch {
	case s.end != nil && (s.end.Error != "" || s.end.Status == StatusCancelled):
		return s.end.Status, s.end.Error
	case s.stepFailed:
		return StatusFailed, ""
	}
	return StatusSucceeded, ""
}

// Stop stops the run for a reason the driver saw (an interrupt, the run's
// timeout, the budget spent mid-turn): nothing new starts, waits end as
// cancelled, and steps ready to start are skipped. The attempts in flight
// the driver cancels itself; each still reports Ended. The first stop is
// the one that counts.
func (s *Schedule) Stop(stop Stop, now time.Time) []Action {
	s.now = now
	return s.advance(now, s.stopWith(stop, false, nil))
}

// Ended reports that attempt a's turn ended with out (an attempt's result
// as attemptResult makes it: what the step kind returned, Status
// StatusCancelled when the run's cancellation cut it, anything else
// otherwise).
func (s *Schedule) Ended(a *StartAttempt, out *StepResult, now time.Time) []Action {
	s.now = now
	sr, er := s.find(a.Step, a.Element)
	if er == nil || er.done || a.N != er.n {
		return nil
	}
	er.res.AddAttempt(out)
	er.res.Attempts = a.N
	var acts []Action
	switch {
	case out.StopReason == string(steps.Completed):
		er.res.Status, er.done = StatusSucceeded, true
	case out.Status == StatusCancelled || s.stop != nil:
		er.res.Status, er.done = StatusCancelled, true
		if er.res.Error == "" {
			er.res.Error = s.cancelCause()
		}
	case a.N > a.Step.Retries:
		er.res.Status, er.done = StatusFailed, true
	default:
		er.waiting = true
		acts = append(acts, &Wait{Step: a.Step, Element: a.Element, N: a.N + 1, After: er.backoff, Error: er.res.Error})
		er.backoff = NextBackoff(er.backoff)
	}
	if er.done {
		acts = s.elementDone(a.Step, er, acts)
	}
	acts, _ = s.settleIfDone(sr, now, acts)
	return s.advance(now, acts)
}

// Released reports that the agents of attempt a are gone: its slot (and,
// with the step's last, the step's run slot) is free.
func (s *Schedule) Released(a *StartAttempt, now time.Time) []Action {
	s.now = now
	sr, er := s.find(a.Step, a.Element)
	if er == nil || er.inFlight == 0 {
		return nil
	}
	er.inFlight--
	s.freeSlots(sr)
	return s.advance(now, nil)
}

// Woke reports that wait w is over: the next attempt starts, unless the
// run stopped meanwhile (the element then ended as cancelled).
func (s *Schedule) Woke(w *Wait, now time.Time) []Action {
	s.now = now
	_, er := s.find(w.Step, w.Element)
	if er == nil || !er.waiting || er.done || w.N != er.n+1 {
		return nil
	}
	er.waiting = false
	return s.advance(now, []Action{s.attempt(er, w.Step)})
}

// find is the run of step st and its element el.
func (s *Schedule) find(st *Step, el *Element) (*stepRun, *elemRun) {
	sr := s.runs[st.ID]
	if sr == nil {
		return nil, nil
	}
	for _, er := range sr.elems {
		if (er.el == nil && el == nil) || (er.el != nil && el != nil && er.el.Index == el.Index) {
			return sr, er
		}
	}
	return sr, nil
}

// elementDone is acts with er's ElementDone when er is a for-each
// element (another step's end is its Settle).
func (s *Schedule) elementDone(st *Step, er *elemRun, acts []Action) []Action {
	if er.el == nil {
		return acts
	}
	return append(acts, &ElementDone{Step: st, Element: er.el, Result: er.res, DurationMS: s.now.Sub(er.begin).Milliseconds()})
}

// attempt starts er's next attempt.
func (s *Schedule) attempt(er *elemRun, st *Step) Action {
	if er.n == 0 {
		er.begin = s.now
	}
	er.n++
	er.inFlight++
	a := &StartAttempt{Step: st, Element: er.el, N: er.n}
	if sr := s.runs[st.ID]; sr != nil && er.el != nil {
		a.Elements = len(sr.items)
	}
	return a
}

// advance settles and starts what it can, after acts, until nothing more
// changes: steps whose needs settled are skipped or given a run slot,
// for-each steps given slots start elements.
func (s *Schedule) advance(now time.Time, acts []Action) []Action {
	for progress := true; progress; {
		progress = false
		// Steps that start together start before any of them can stop the
		// run: a for-each whose list cannot be had fails after the pass.
		var unlisted []*stepRun
		for _, st := range s.wf.Steps {
			if s.of.Results[st.ID] != nil {
				continue
			}
			sr := s.runs[st.ID]
			if sr == nil {
				if !s.needsSettled(st) {
					continue
				}
				if res := s.wf.Unrun(st, s.of.Results, func() *Scope { return s.Scope(nil) }, s.stopping()); res != nil {
					acts = s.settle(st, res, acts)
					progress = true
					continue
				}
				sr = &stepRun{st: st}
				s.runs[st.ID] = sr
			}
			if !sr.started {
				if s.stop != nil {
					delete(s.runs, st.ID)
					acts = s.settle(st, Skipped("not started: "+s.stop.Cause), acts)
					progress = true
					continue
				}
				if s.held >= s.limit {
					continue
				}
				s.held++
				sr.started, sr.begin, progress = true, now, true
				if acts = s.begin(sr, acts); sr.listErr != nil {
					unlisted = append(unlisted, sr)
					continue
				}
			}
			if st.ForEach != nil && s.startElements(sr, &acts) {
				progress = true
			}
			var settled bool
			if acts, settled = s.settleIfDone(sr, now, acts); settled {
				progress = true
			}
		}
		for _, sr := range unlisted {
			sr.started, sr.settled = false, true
			s.held--
			acts = s.settle(sr.st, Errored(sr.listErr.Error()), acts)
		}
	}
	return acts
}

// begin starts a step that got its run slot: its first attempt, or its
// for-each's list (a list that cannot be had is listErr, which fails the
// step).
func (s *Schedule) begin(sr *stepRun, acts []Action) []Action {
	st := sr.st
	if st.ForEach == nil {
		er := &elemRun{res: newTotal(), backoff: s.backoff}
		sr.elems = []*elemRun{er}
		return append(acts, s.attempt(er, st))
	}
	items, err := st.Items(s.Scope(nil))
	if err != nil {
		sr.listErr = err
		return acts
	}
	sr.items = items
	if sr.items == nil {
		sr.items = []any{} // settled at once, with empty lists
	}
	return acts
}

// startElements starts as many of a for-each's elements as its slots
// allow; it reports whether it started one.
func (s *Schedule) startElements(sr *stepRun, acts *[]Action) bool {
	limit := sr.st.ForEachMaxParallel
	if limit <= 0 {
		limit = len(sr.items)
	}
	started := false
	for s.stop == nil && sr.live < max(limit, 1) && len(sr.elems) < len(sr.items) {
		i := len(sr.elems)
		er := &elemRun{el: &Element{Item: sr.items[i], Index: i}, res: newTotal(), backoff: s.backoff}
		sr.elems = append(sr.elems, er)
		sr.live++
		*acts = append(*acts, s.attempt(er, sr.st))
		started = true
	}
	return started
}

// settleIfDone settles sr when all its elements are done (for a for-each
// stopped early, those never started are cancelled), returning acts with
// what that adds and whether it settled sr.
func (s *Schedule) settleIfDone(sr *stepRun, now time.Time, acts []Action) ([]Action, bool) {
	if sr == nil || sr.settled || !sr.started || sr.st.ForEach != nil && sr.items == nil {
		return acts, false
	}
	if sr.st.ForEach != nil && len(sr.elems) < len(sr.items) && s.stop == nil {
		return acts, false
	}
	for _, er := range sr.elems {
		if !er.done {
			return acts, false
		}
	}
	var res *StepResult
	if sr.st.ForEach == nil {
		res = sr.elems[0].res
	} else {
		each := make([]*StepResult, len(sr.items))
		for i := range each {
			if i < len(sr.elems) {
				each[i] = sr.elems[i].res
			} else {
				each[i] = &StepResult{Status: StatusCancelled, Error: "not started: " + s.stop.Cause, Permissions: []policies.PermissionRecord{}}
			}
		}
		res = sr.st.Combine(each)
	}
	res.DurationMS = now.Sub(sr.begin).Milliseconds()
	sr.settled = true
	acts = s.settle(sr.st, res, acts)
	s.freeSlots(sr)
	return acts, true
}

// freeSlots gives back the for-each slots of elements that are done and
// gone, and the step's run slot once it settled and all its agents are
// gone.
func (s *Schedule) freeSlots(sr *stepRun) {
	if sr == nil {
		return
	}
	gone := true
	live := 0
	for _, er := range sr.elems {
		if er.inFlight > 0 {
			gone = false
		}
		if !er.done || er.inFlight > 0 {
			live++
		}
	}
	sr.live = live
	if sr.settled && gone && sr.started {
		sr.started = false // the slot is back; settled keeps the step from starting again
		s.held--
	}
}

// settle makes res the step's result: Settle, then what it means for the
// run (a failure without continue-on-error stops it, and so does a spent
// budget).
func (s *Schedule) settle(st *Step, res *StepResult, acts []Action) []Action {
	s.of.Results[st.ID] = res
	acts = append(acts, &Settle{Step: st, Result: res})
	if res.Status == StatusFailed && !st.ContinueOnError {
		s.stepFailed = true
		acts = s.stopWith(Stop{Cause: errRunFailing.Error(), Status: StatusFailed}, true, acts)
	}
	if res.Attempts > 0 && !s.wf.Budget.IsZero() {
		if err := s.wf.Budget.Check("", s.Spent()); err != nil {
			acts = s.stopWith(Stop{Cause: err.Error(), Status: StatusFailed, Error: err.Error()}, true, acts)
		}
	}
	return acts
}

// stopWith stops the run, cancelling what is in flight when the stop is
// the schedule's own (a driver cancels for its own stops), and ending the
// waits. The first stop gives the cause; an interrupt that comes later
// still makes the run cancelled.
func (s *Schedule) stopWith(stop Stop, own bool, acts []Action) []Action {
	if s.stop != nil {
		if stop.Status == StatusCancelled && s.end.Status != StatusCancelled {
			s.end = &stop
		}
		return acts
	}
	s.stop, s.end = &stop, &stop
	if own {
		acts = append(acts, &Cancel{Cause: stop.Cause})
	}
	for _, st := range s.wf.Steps {
		sr := s.runs[st.ID]
		if sr == nil {
			continue
		}
		for _, er := range sr.elems {
			if er.waiting && !er.done {
				er.waiting, er.done = false, true
				er.res.Status, er.res.Error = StatusCancelled, stop.Cause
				acts = s.elementDone(st, er, acts)
			}
		}
	}
	return acts
}

// Spent is what the settled steps spent, as a budget counts it (nil:
// nothing reported).
func (s *Schedule) Spent() *steps.Usage { return s.wf.Spent(s.of.Results) }

func (s *Schedule) needsSettled(st *Step) bool {
	for _, n := range st.Needs {
		if s.of.Results[n] == nil {
			return false
		}
	}
	return true
}

// stopping is why the run starts nothing new, "" while it goes on.
func (s *Schedule) stopping() string {
	if s.stop == nil {
		return ""
	}
	return s.stop.Cause
}

// cancelCause is the error of an attempt the run's stop cut.
func (s *Schedule) cancelCause() string {
	if s.stop == nil {
		return "cancelled"
	}
	return s.stop.Cause
}

// newTotal is an element's result before its first attempt.
func newTotal() *StepResult {
	return &StepResult{Permissions: []policies.PermissionRecord{}}
}

// String says where the schedule is, for a driver's error messages and
// tests.
func (s *Schedule) String() string {
	return fmt.Sprintf("%d/%d steps settled, %d of %d slots held", len(s.of.Results), len(s.wf.Steps), s.held, s.limit)
}
