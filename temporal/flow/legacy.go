package flow

// The interpreter as the first releases scheduled runs, before the one
// engine.Schedule (issue 24): frozen, and used only to replay a run that
// such a release started (workflow.GetVersion finds no version marker in
// its history). Delete it once no run of those releases can be in flight.

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// legacyRun is a run scheduled the first releases' way.
type legacyRun struct {
	*scheduler
	timedOut   bool
	overBudget error
}

// legacyEnd is the run's status and error as the first releases computed
// them.
func (s *legacyRun) end(ctx workflow.Context) (engine.Status, string) {
	status := engine.StatusSucceeded
	for _, st := range s.wf.Steps {
		if res := s.results[st.ID]; res != nil && res.Status == engine.StatusFailed && !st.ContinueOnError {
			status = engine.StatusFailed
		}
	}
	switch {
	case ctx.Err() != nil:
		return engine.StatusCancelled, "cancelled"
	case s.timedOut:
		return engine.StatusFailed, fmt.Sprintf("run timed out after %s", s.req.Timeout)
	case s.overBudget != nil:
		return engine.StatusFailed, s.overBudget.Error()
	}
	return status, ""
}

// legacySettled is a step's end, sent by the coroutine that ran it.
type legacySettled struct {
	id  string
	res *engine.StepResult
	err error
}

// run starts each step once its needs have settled, at most MaxParallel
// at once, until every step has settled. A step that fails (without
// continue-on-error) cancels the others, as on the CLI.
func (s *legacyRun) run(ctx workflow.Context) {
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
					ch.Send(recv, legacySettled{id: st.ID, res: res, err: err})
				})
			}
		}
		if running == 0 {
			return
		}
		var d legacySettled
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
func (s *legacyRun) failed(st *engine.Step, cancel workflow.CancelFunc) {
	if st.ContinueOnError {
		return
	}
	if s.cause == "" {
		s.cause = "cancelled: another step failed"
	}
	cancel()
}

// stopping is why the run starts no more steps, "" while it goes on.
func (s *legacyRun) stopping(runCtx workflow.Context) string {
	switch {
	case runCtx.Err() == nil:
		return ""
	case s.cause != "":
		return s.cause
	}
	return "cancelled"
}

func (s *legacyRun) needsSettled(st *engine.Step) bool {
	for _, n := range st.Needs {
		if s.results[n] == nil {
			return false
		}
	}
	return true
}

// runStep runs a step with its retries, or its for-each elements.
func (s *legacyRun) runStep(ctx workflow.Context, st *engine.Step) (*engine.StepResult, error) {
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
func (s *legacyRun) attempts(ctx workflow.Context, st *engine.Step, el *engine.Element) (*engine.StepResult, error) {
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
