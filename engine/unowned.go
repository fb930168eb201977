package engine

import (
	"sync"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// runPermissions passes every event on and keeps the permission records
// that belong to no step: a `permission` event without a step is a request
// acpflow answered for no step's turn (an agent asking for a session kept
// between two turns, or during its teardown), which the run's result holds
// (RunResult.Permissions).
type runPermissions struct {
	steps.Sink

	mu     sync.Mutex
	list   []policies.PermissionRecord
	closed bool
}

func (s *runPermissions) Emit(e steps.Event) {
	if p, ok := e.Data.(steps.Permission); ok && e.Step == "" {
		s.mu.Lock()
		if !s.closed {
			s.list = append(s.list, p.PermissionRecord)
		}
		s.mu.Unlock()
	}
	s.Sink.Emit(e)
}

// close returns the records kept; later ones (a pooled agent asking while
// idle after the run ended) are events only.
func (s *runPermissions) close() []policies.PermissionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.list
}
