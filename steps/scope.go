package steps

import (
	"sync"
)

// Scope holds what a kind keeps beyond one step: within a run, a live
// agent whose session a later step continues; within a batch, the pool of
// agent processes that `reuse: true` shares between runs. The engine owns
// a run's scope and ends it after the run's last step settles; runs.Runner
// owns a batch's and ends it after the batch's last run (a lone run's batch
// scope is the engine's own).
//
// # Notes
//
// A value lives as long as its scope, so work a kind hands the scope
// (Go) is waited for by End: what a kind keeps alive here it tears down
// from an OnEnd hook, and the run (or batch) ends only when that is done.
type Scope struct {
	// Concurrency is how many runs share the scope at once (a batch's
	// --concurrency; 1 for a lone run): a bound for what a kind pools.
	Concurrency int

	// vmu guards values alone: a value's init may register hooks (mu).
	vmu    sync.Mutex
	values map[any]any

	mu       sync.Mutex
	settled  []func(step string)
	ends     []func()
	ended    bool
	lingered sync.WaitGroup
}

// NewScope returns an empty scope for concurrency runs at once.
func NewScope(concurrency int) *Scope {
	return &Scope{Concurrency: max(concurrency, 1), values: map[any]any{}}
}

// Value returns the scope's value under key, made by init on first use.
func (s *Scope) Value(key any, init func() any) any {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	v, ok := s.values[key]
	if !ok {
		v = init()
		s.values[key] = v
	}
	return v
}

// OnSettled registers f to hear of every step of the run that settles
// (succeeded, failed, skipped or cancelled), after its result is final.
func (s *Scope) OnSettled(f func(step string)) {
	s.mu.Lock()
	s.settled = append(s.settled, f)
	s.mu.Unlock()
}

// OnEnd registers f to run when the scope ends; f may hand work to Go.
// After the scope has ended, f runs at once.
func (s *Scope) OnEnd(f func()) {
	s.mu.Lock()
	if !s.ended {
		s.ends = append(s.ends, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

// Go runs f in the background; End waits for it.
func (s *Scope) Go(f func()) { s.lingered.Go(f) }

// Settled tells the OnSettled hooks that step has settled. The engine
// calls it.
func (s *Scope) Settled(step string) {
	s.mu.Lock()
	hooks := append([]func(string){}, s.settled...)
	s.mu.Unlock()
	for _, f := range hooks {
		f(step)
	}
}

// End runs the OnEnd hooks, in the order they were registered, and waits
// for everything handed to Go. Its owner calls it once, when nothing will
// use the scope any more.
func (s *Scope) End() {
	s.mu.Lock()
	s.ended = true
	hooks := s.ends
	s.ends = nil
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	s.lingered.Wait()
}
