package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// schedule drives the run's Schedule on this machine: each attempt it asks
// for runs in a goroutine, each wait between attempts is a timer, and what
// happens comes back to this one loop, which alone feeds the schedule. It
// returns when every step has settled; agents may still be going (they
// join r.lingering). ctx is the run's; cancelling it with a cause stops
// the run (failRun is how the schedule's own stops cancel it).
func (r *run) schedule(parent, ctx context.Context, failRun context.CancelCauseFunc) {
	r.sched = NewSchedule(r.wf, r.scopeOf(r.opt.Done), r.opt.RetryBackoff)
	happened := make(chan func(time.Time) []Action)
	over := make(chan struct{})
	defer close(over)
	// report hands what happened to the loop; once the loop is over (every
	// step settled), a late Released has nothing left to free.
	report := func(f func(time.Time) []Action) {
		select {
		case happened <- f:
		case <-over:
		}
	}
	var timers []*time.Timer
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	stopped := false
	acts := r.sched.Start(time.Now())
	for {
		for _, a := range acts {
			switch a := a.(type) {
			case *StartAttempt:
				r.start(ctx, a, report)
			case *Wait:
				r.emitAt(a.Step.ID, a.Element, steps.Retry{AfterMS: a.After.Milliseconds(), Error: a.Error})
				timers = append(timers, time.AfterFunc(a.After, func() {
					report(func(now time.Time) []Action { return r.sched.Woke(a, now) })
				}))
			case *ElementDone:
				r.emitAt(a.Step.ID, a.Element, a.ElementEnd())
			case *Settle:
				r.settle(a.Step, a.Result)
			case *Cancel:
				cause := errRunFailing
				if a.Cause != errRunFailing.Error() {
					cause = errors.New(a.Cause)
				}
				failRun(cause)
			}
		}
		if r.sched.Done() {
			return
		}
		done := ctx.Done()
		if stopped {
			done = nil
		}
		// A stop is always fed before what it caused: an attempt cut by
		// it is then cancelled, not failed.
		select {
		case f := <-happened:
			acts = nil
			if !stopped && ctx.Err() != nil {
				stopped, acts = true, r.sched.Stop(stopOf(parent, ctx), time.Now())
			}
			acts = append(acts, f(time.Now())...)
		case <-done:
			stopped, acts = true, r.sched.Stop(stopOf(parent, ctx), time.Now())
		}
	}
}

// start runs attempt a in a goroutine: step_start, the attempt, its
// transcript, then Ended at its turn's end and Released once its agents
// are gone.
func (r *run) start(ctx context.Context, a *StartAttempt, report func(func(time.Time) []Action)) {
	st := a.Step
	if r.opt.Recorder != nil {
		r.opt.Recorder.StepStarted(r.opt.RunID, st.ID, r.ord(st.ID), a.N)
	}
	r.emitAt(st.ID, a.Element, a.StepStart())
	r.lingering.Add(1)
	go func() {
		defer r.lingering.Done()
		var linger sync.WaitGroup
		out := r.attempt(ctx, st, a.N, a.Element, &linger)
		if t := out.Transcript; t != nil && r.opt.Recorder != nil {
			t.Step, t.Attempt = st.ID, a.N
			if a.Element != nil {
				index := a.Element.Index
				t.Index = &index
			}
			r.opt.Recorder.StepTranscript(r.opt.RunID, t)
		}
		res := attemptResult(out)
		if out.StopReason != steps.Completed && ctx.Err() != nil {
			res.Status = StatusCancelled
		}
		report(func(now time.Time) []Action { return r.sched.Ended(a, res, now) })
		linger.Wait()
		report(func(now time.Time) []Action { return r.sched.Released(a, now) })
	}()
}

// stopOf is the stop a cancelled run context means: an interrupt
// (cancelled), a step that failed (the schedule's own), a plain
// cancellation (cancelled), or any other cause (failed, saying why: the
// run's timeout, its budget, acpflow's stdout gone).
func stopOf(parent, ctx context.Context) Stop {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(context.Cause(parent), ErrInterrupted):
		return Stop{Cause: ErrInterrupted.Error(), Status: StatusCancelled, Error: ErrInterrupted.Error()}
	case errors.Is(cause, errRunFailing):
		return Stop{Cause: cause.Error(), Status: StatusFailed}
	case errors.Is(cause, context.Canceled):
		return Stop{Cause: cause.Error(), Status: StatusCancelled, Error: cause.Error()}
	}
	return Stop{Cause: cause.Error(), Status: StatusFailed, Error: cause.Error()}
}
