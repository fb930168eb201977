// Package steptest helps test what lies above the step contract (the
// scheduler, the loader, a backend) without a subprocess: Fake is a step
// kind that runs in-process, waits, fails or answers as its `with:` says,
// and keeps a trace of what ran when.
//
// Fake is also the smallest complete kind, and shows what one is: a folder
// that imports only package steps, and a steps.Register call (a real kind
// makes it from an init, and package standard imports it).
package steptest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// FakeName is the `uses:` value of the Fake kind.
const FakeName = "fake"

// Fake is a step kind that makes fake steps and keeps the trace of every
// run they ran in.
type Fake struct {
	mu     sync.Mutex
	traces map[string]*Trace // by run id
}

var _ steps.Kind = (*Fake)(nil)

// NewFake returns a kind to register (steps.Register) once per test binary.
func NewFake() *Fake { return &Fake{traces: map[string]*Trace{}} }

// Name implements steps.Kind.
func (k *Fake) Name() string { return FakeName }

// Keys implements steps.Kind.
func (k *Fake) Keys() []string {
	return []string{"output", "sleep", "fail", "fail-attempts", "wait-for-peak", "wait-for-cancel", "teardown", "teardown-until"}
}

// Required implements steps.Kind.
func (k *Fake) Required() []string { return nil }

//go:embed schema.json
var withSchema []byte

// Schema implements steps.Kind.
func (k *Fake) Schema() json.RawMessage { return withSchema }

// Prepare implements steps.Kind: sleep must be a duration and
// fail-attempts a whole number, each reported at its value.
func (k *Fake) Prepare(cfg steps.StepConfig) (steps.Step, error) {
	s := &step{kind: k}
	if v, ok := cfg.With["sleep"]; ok {
		text, _ := v.(string)
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return nil, steps.FieldErrorf([]string{"with", "sleep"}, "with.sleep: want a duration such as 50ms, got %v", v)
		}
		s.sleep = d
	}
	if v, ok := cfg.With["fail-attempts"]; ok {
		n, isInt := v.(int)
		if !isInt || n < 0 {
			return nil, steps.FieldErrorf([]string{"with", "fail-attempts"}, "with.fail-attempts: want a whole number of attempts, got %v", v)
		}
		s.failAttempts = n
	}
	if v, ok := cfg.With["wait-for-peak"]; ok {
		n, isInt := v.(int)
		if !isInt || n < 1 {
			return nil, steps.FieldErrorf([]string{"with", "wait-for-peak"}, "with.wait-for-peak: want a number of attempts at once, at least 1, got %v", v)
		}
		s.waitForPeak = n
	}
	if v, ok := cfg.With["teardown"]; ok {
		text, _ := v.(string)
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return nil, steps.FieldErrorf([]string{"with", "teardown"}, "with.teardown: want a duration such as 50ms, got %v", v)
		}
		s.teardown = d
	}
	s.teardownUntil, _ = cfg.With["teardown-until"].(string)
	s.fail, _ = cfg.With["fail"].(bool)
	s.waitForCancel, _ = cfg.With["wait-for-cancel"].(bool)
	return s, nil
}

// Trace is what the fake steps of one run did.
type Trace struct {
	// Started lists the steps in the order their attempts began, and
	// Ended in the order they returned.
	Started, Ended []string
	// Peak is the most attempts that were running at once.
	Peak int
	// Log is "start STEP", "end STEP" (the turn returned) and "gone STEP"
	// (its teardown ended), in the order they happened.
	Log  []string
	live int
}

// Trace returns a copy of the trace of the run runID.
func (k *Fake) Trace(runID string) Trace {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.traces[runID]
	if t == nil {
		return Trace{}
	}
	return Trace{Started: append([]string(nil), t.Started...), Ended: append([]string(nil), t.Ended...), Peak: t.Peak, Log: append([]string(nil), t.Log...)}
}

func (k *Fake) enter(runID, stepID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.traces[runID]
	if t == nil {
		t = &Trace{}
		k.traces[runID] = t
	}
	t.Started = append(t.Started, stepID)
	t.Log = append(t.Log, "start "+stepID)
	t.live++
	t.Peak = max(t.Peak, t.live)
}

func (k *Fake) leave(runID, stepID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.traces[runID]
	t.Ended = append(t.Ended, stepID)
	t.Log = append(t.Log, "end "+stepID)
	t.live--
}

// gone logs the end of stepID's teardown.
func (k *Fake) gone(runID, stepID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.traces[runID]
	t.Log = append(t.Log, "gone "+stepID)
}

// peak is the most attempts of the run runID that have run at once.
func (k *Fake) peak(runID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := k.traces[runID]; t != nil {
		return t.Peak
	}
	return 0
}

// started reports whether stepID has started in the run runID.
func (k *Fake) started(runID, stepID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.traces[runID]
	return t != nil && slices.Contains(t.Started, stepID)
}

// step is one prepared fake step.
type step struct {
	kind         *Fake
	sleep        time.Duration
	fail         bool
	failAttempts int
	// waitForPeak holds the turn until the run's Peak reaches it: a test
	// that steps overlap up to max-parallel then depends on that event,
	// not on a sleep outlasting the others' start on a loaded machine.
	waitForPeak   int
	waitForCancel bool
	// teardown is how long the step's "agent" takes to go after its turn
	// (as steps.Invocation.Linger runs it), or until teardownUntil has
	// started if that comes first.
	teardown      time.Duration
	teardownUntil string
}

// Run implements steps.Step.
func (s *step) Run(ctx context.Context, inv *steps.Invocation) steps.Result {
	if s.teardown > 0 { // after leave: the turn ends, then the agent goes
		defer inv.Linger(s.tearDown(inv.RunID, inv.StepID))
	}
	s.kind.enter(inv.RunID, inv.StepID)
	defer s.kind.leave(inv.RunID, inv.StepID)
	if s.sleep > 0 {
		select {
		case <-ctx.Done():
			return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
		case <-time.After(s.sleep):
		}
	}
	for s.waitForPeak > 0 && s.kind.peak(inv.RunID) < s.waitForPeak {
		select {
		case <-ctx.Done():
			return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
		case <-time.After(time.Millisecond):
		}
	}
	if s.waitForCancel {
		<-ctx.Done()
		return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
	}
	switch {
	case inv.Attempt <= s.failAttempts:
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("attempt %d fails (fail-attempts: %d)", inv.Attempt, s.failAttempts)}
	case s.fail:
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("told to fail")}
	}
	out := ""
	if v, ok := inv.With["output"]; ok && v != nil {
		out = fmt.Sprint(v)
	}
	return steps.Result{StopReason: steps.Completed, Output: out, Final: out}
}

// tearDown is the step's teardown: it lasts s.teardown, or until
// s.teardownUntil has started.
func (s *step) tearDown(runID, stepID string) func() {
	return func() {
		defer s.kind.gone(runID, stepID)
		deadline := time.Now().Add(s.teardown)
		for time.Now().Before(deadline) {
			if s.teardownUntil != "" && s.kind.started(runID, s.teardownUntil) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
