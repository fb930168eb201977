package acpsubagent

import (
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
)

// kept is a session a step finished with while later steps still mean to
// continue it (`session: STEP`): the live process, the session on it, and
// who is still to come. It lives in the run's scope.
type kept struct {
	proc      *proc // nil once the process is no longer usable
	sessionID acp.SessionId
	offered   offered // the modes and options the session offered
	pending   map[string]bool
	// turn serialises the turns of steps that continue the same session
	// (two parallel steps with `session: A`, or a for-each): one session
	// takes one prompt at a time.
	turn sync.Mutex
}

// sessions is the run's registry of kept sessions, by the step that kept
// them. A kept process is released when every step that names the session
// has settled (ran, failed or was skipped), or when the run ends.
type sessions struct {
	scope *steps.Scope
	mu    sync.Mutex
	byID  map[string]*kept
	// owners is the step that first had each session id of the run (a new
	// session, or a fork): a fork must not answer with another's.
	owners map[acp.SessionId]string
}

type sessionsKey struct{}

// runSessions is the registry of inv's run, made on first use; nil when
// the step runs without a run scope.
func runSessions(inv *steps.Invocation) *sessions {
	if inv.Run == nil {
		return nil
	}
	return inv.Run.Value(sessionsKey{}, func() any {
		s := &sessions{scope: inv.Run, byID: map[string]*kept{}}
		inv.Run.OnSettled(s.settled)
		inv.Run.OnEnd(s.end)
		return s
	}).(*sessions)
}

// keep registers step's session on p for the steps that will continue it,
// taking a reference on p for them.
func (s *sessions) keep(step string, p *proc, id acp.SessionId, off offered, continuers []string) {
	if !p.hold(nil) {
		return
	}
	p.book.keep(id)
	k := &kept{proc: p, sessionID: id, offered: off, pending: map[string]bool{}}
	for _, c := range continuers {
		k.pending[c] = true
	}
	s.mu.Lock()
	old := s.byID[step]
	s.byID[step] = k
	s.mu.Unlock()
	if old != nil { // an earlier attempt's: superseded
		s.drop(old)
	}
}

// own books session id as step's, unless a step had it before.
func (s *sessions) own(id acp.SessionId, step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners == nil {
		s.owners = map[acp.SessionId]string{}
	}
	if _, had := s.owners[id]; !had {
		s.owners[id] = step
	}
}

// ownerOf is the step that first had session id in the run.
func (s *sessions) ownerOf(id acp.SessionId) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step, ok := s.owners[id]
	return step, ok
}

// lookup returns what step kept, or nil.
func (s *sessions) lookup(step string) *kept {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[step]
}

// take returns k's process with a reference for inv, or nil when it is no
// longer usable (its agent died, or a turn on it failed). The caller holds
// k.turn.
func (s *sessions) take(k *kept, inv *steps.Invocation) *proc {
	s.mu.Lock()
	p := k.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	if p.hold(inv) {
		return p
	}
	s.detach(k)
	return nil
}

// detach lets go of k's process: the next step that continues the session
// does so on a fresh process.
func (s *sessions) detach(k *kept) {
	s.mu.Lock()
	p := k.proc
	k.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.book.unkeep(k.sessionID)
		p.release(s.scope.Go)
	}
}

// adopt makes p, a fresh process that picked k's session up, the one the
// steps still to continue k use, when k has none.
func (s *sessions) adopt(k *kept, p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.proc != nil || len(k.pending) == 0 || !p.hold(nil) {
		return
	}
	p.book.keep(k.sessionID)
	k.proc = p
}

// settled hears of every step that settles: one that continued a kept
// session is no longer to come, and the last one releases the process.
func (s *sessions) settled(step string) {
	s.mu.Lock()
	var done []*kept
	for from, k := range s.byID {
		if !k.pending[step] {
			continue
		}
		delete(k.pending, step)
		if len(k.pending) == 0 {
			delete(s.byID, from)
			done = append(done, k)
		}
	}
	s.mu.Unlock()
	for _, k := range done {
		s.drop(k)
	}
}

// drop releases a kept session that no step will continue: closed on a
// pooled agent (which lives on), with the process otherwise.
func (s *sessions) drop(k *kept) {
	s.mu.Lock()
	p := k.proc
	k.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.book.unkeep(k.sessionID)
	s.scope.Go(func() {
		if p.pool != nil {
			p.closeSession(k.sessionID)
		}
		p.release(func(f func()) { f() })
	})
}

// end releases whatever is still kept when the run ends (a step that
// would have continued it never settled, the run was cancelled).
func (s *sessions) end() {
	s.mu.Lock()
	all := make([]*kept, 0, len(s.byID))
	for _, k := range s.byID {
		all = append(all, k)
	}
	s.byID = map[string]*kept{}
	s.mu.Unlock()
	for _, k := range all {
		s.drop(k)
	}
}
