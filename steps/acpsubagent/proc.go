package acpsubagent

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/confine"
)

// proc is one live agent process and its ACP connection. Usually one
// step's attempt uses it and tears it down after its turn; a step whose
// session a later step continues keeps it for that step (sessions.go), and
// an agent with `reuse: true` goes back to a pool (pool.go). Whoever holds
// it holds a reference; the last one out tears it down or pools it.
//
// # Notes
//
// One connection serves several sessions over its life, so the agent's
// requests and updates are routed by session id to the client of the turn
// that owns the session now; an update for a session no turn owns is
// dropped, a permission request for one is answered `cancelled` and
// recorded (unowned.go).
type proc struct {
	*agentConn
	agent *steps.Agent
	// spawner is the invocation that started the process: the process is
	// on its run's record, so its end is reported there too.
	spawner *steps.Invocation
	caps    acp.AgentCapabilities

	mu sync.Mutex
	// owner is the invocation that used the process last: its teardown
	// is reported in that step's events.
	owner    *steps.Invocation
	clients  map[acp.SessionId]*client
	sessions map[acp.SessionId]bool // open on the agent, closed at teardown
	// costs is each session's cumulative cost as the agent last reported
	// it (usage_update): where the next step on the session counts from.
	costs  map[acp.SessionId]acp.Cost
	refs   int
	broken bool // a turn on it failed: it is torn down, never reused
	// pool takes the process back when the last reference goes, when set.
	pool    *pool
	poolKey string
	gone    bool // torn down (or being torn down)

	// presetDir is the process's private config directory (presetdir.go),
	// removed once it is gone; "" for none.
	presetDir string
	// book is what the process knows of its sessions beyond clients: whose
	// they were, and who is using the process (unowned.go).
	book sessionBook
	// confinement is the process's sandbox (confine.go), released once it
	// is gone; nil for none.
	confinement *confine.Confinement
	// gateway is the process's model gateway (gateway.go), closed once
	// its group is gone; nil for none.
	gateway *gatewayRoute

	// secrets are the values the process's env policy kept from it or the
	// workflow gave it explicitly: what no transcript may hold.
	secrets []string
	// scribes are the transcripts of the attempts using the process now.
	scribeMu sync.Mutex
	scribes  []*scribe
}

// listen adds an attempt's transcript: it sees every line from now on.
func (p *proc) listen(s *scribe) {
	p.scribeMu.Lock()
	p.scribes = append(p.scribes, s)
	p.scribeMu.Unlock()
}

// unlisten ends an attempt's transcript.
func (p *proc) unlisten(s *scribe) {
	p.scribeMu.Lock()
	p.scribes = slices.DeleteFunc(p.scribes, func(x *scribe) bool { return x == s })
	p.scribeMu.Unlock()
}

// tapLine hands one line of the connection to the transcripts.
func (p *proc) tapLine(dir string, line []byte) {
	p.scribeMu.Lock()
	defer p.scribeMu.Unlock()
	for _, s := range p.scribes {
		s.add(dir, line)
	}
}

// newProc wraps a spawned agent; the caller connects it with p.handle.
func newProc(ac *agentConn, agent *steps.Agent, inv *steps.Invocation) *proc {
	return &proc{
		agentConn: ac, agent: agent, spawner: inv, owner: inv, refs: 1,
		clients: map[acp.SessionId]*client{}, sessions: map[acp.SessionId]bool{}, costs: map[acp.SessionId]acp.Cost{},
	}
}

// alive reports whether the process can take another turn: not broken,
// not torn down, its connection open and the process running.
func (p *proc) alive() bool {
	p.mu.Lock()
	bad := p.broken || p.gone
	p.mu.Unlock()
	if bad {
		return false
	}
	select {
	case <-p.conn.Done():
		return false
	case <-p.child.Exited():
		return false
	default:
		return true
	}
}

// hold adds a reference for inv, which from now on receives the events of
// the process's teardown; false when the process can no longer be used.
func (p *proc) hold(inv *steps.Invocation) bool {
	if !p.alive() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken || p.gone {
		return false
	}
	p.refs++
	if inv != nil {
		p.owner = inv
	}
	return true
}

// markBroken keeps the process from any further turn: a turn on it failed
// or was cancelled, so what the agent does next is unknown.
func (p *proc) markBroken() {
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
}

// release drops a reference. The last one out pools a healthy process or
// tears it down, handing the teardown to linger (the caller's Linger, so
// that whatever waits for it waits for the teardown).
func (p *proc) release(linger func(func())) {
	p.mu.Lock()
	p.refs--
	last := p.refs == 0
	pooled := p.pool != nil && !p.broken
	p.mu.Unlock()
	if !last {
		return
	}
	if pooled && p.alive() && p.pool.put(p) {
		return
	}
	p.mu.Lock()
	gone := p.gone
	p.mu.Unlock()
	if !gone {
		linger(p.retire())
	}
}

// retire marks the process gone, so that nothing hands it out again, and
// returns its teardown for the caller to run where it is waited for.
// Whoever removed it from use (the last reference, the pool) calls it once.
func (p *proc) retire() func() {
	p.mu.Lock()
	p.gone = true
	p.mu.Unlock()
	return p.teardown
}

// route makes c the client of session id: its updates and permission
// requests go to c from now on.
func (p *proc) route(id acp.SessionId, c *client) {
	p.mu.Lock()
	p.clients[id] = c
	p.sessions[id] = true
	if cost, ok := p.costs[id]; ok {
		c.countCostFrom(cost)
	}
	p.mu.Unlock()
	p.book.routed(id, c)
}

// unroute stops routing session id to c (if c still owns it).
func (p *proc) unroute(id acp.SessionId, c *client) {
	p.mu.Lock()
	if p.clients[id] == c {
		delete(p.clients, id)
	}
	if cost, ok := c.sessionCost(); ok {
		p.costs[id] = cost
	}
	p.mu.Unlock()
}

// opened records a session the agent holds open, to close at teardown.
func (p *proc) opened(id acp.SessionId) {
	p.mu.Lock()
	p.sessions[id] = true
	p.mu.Unlock()
}

// closeSession closes one session where the agent supports it, so that a
// pooled agent does not accumulate the sessions of every step it served.
func (p *proc) closeSession(id acp.SessionId) {
	p.mu.Lock()
	open := p.sessions[id]
	delete(p.sessions, id)
	p.mu.Unlock()
	if !open || p.caps.SessionCapabilities.Close == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeLimit)
	defer cancel()
	acp.SendRequest[acp.CloseSessionResponse](p.conn, ctx, acp.AgentMethodSessionClose, acp.CloseSessionRequest{SessionId: id})
}

func (p *proc) client(id acp.SessionId) *client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clients[id]
}

// handle is the connection's handler: it routes session/update and
// session/request_permission to the client of their session. acpflow
// advertises no fs or terminal capability, so an agent that asks for
// anything else is told the method does not exist.
func (p *proc) handle(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
	switch method {
	case acp.ClientMethodSessionUpdate:
		if p.ownUpdate(params) {
			return nil, nil
		}
		var n acp.SessionNotification
		if err := decodeParams(params, &n); err != nil {
			p.gate.handledOne()
			return nil, err
		}
		c := p.client(n.SessionId)
		if c == nil {
			p.gate.handledOne()
			return nil, nil
		}
		if err := c.SessionUpdate(ctx, n); err != nil {
			return nil, answerError(err)
		}
		return nil, nil
	case acp.ClientMethodSessionRequestPermission:
		defer p.gate.answeredOne()
		var r acp.RequestPermissionRequest
		if err := decodeParams(params, &r); err != nil {
			return nil, err
		}
		c := p.client(r.SessionId)
		if c == nil {
			return p.answerUnowned(ctx, r), nil
		}
		resp, err := c.RequestPermission(ctx, r)
		if err != nil {
			return nil, answerError(err)
		}
		return resp, nil
	}
	return nil, acp.NewMethodNotFound(method)
}

// closeLimit bounds the wait for session/close (each, and all of them at
// teardown) before the ladder.
const closeLimit = 250 * time.Millisecond

// teardown closes the sessions the agent holds where it supports it, runs
// the ladder, and records how it ended.
func (p *proc) teardown() {
	p.mu.Lock()
	owner := p.owner
	var open []acp.SessionId
	for id := range p.sessions {
		open = append(open, id)
	}
	p.sessions = map[acp.SessionId]bool{}
	p.mu.Unlock()
	if p.caps.SessionCapabilities.Close != nil && len(open) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), closeLimit)
		for _, id := range open {
			acp.SendRequest[acp.CloseSessionResponse](p.conn, ctx, acp.AgentMethodSessionClose, acp.CloseSessionRequest{SessionId: id})
		}
		cancel()
	}
	// From here on nothing is waiting for the agent's updates: let its
	// stdout flow, so an agent blocked writing can see its EOF.
	p.gate.close()
	rep := p.child.Teardown(ladder(p.agent, p.confinement != nil))
	p.gate.awaitAnswers(p.conn.Done(), answerLimit) // each on record before the run ends
	if p.presetDir != "" {
		os.RemoveAll(p.presetDir)
	}
	if p.confinement != nil {
		p.confinement.Release()
	}
	p.gateway.close()
	p.spawner.ProcessEnded(p.child.Pid(), rep.Descendants)
	td := acpagent.Teardown{
		PID: p.child.Pid(), Tier: rep.Tier, Exit: rep.Exit, DurationMS: rep.Duration.Milliseconds(),
		EscapedKilled: rep.Escaped, Descendants: rep.Descendants,
		NonProtocolLines: p.noise.Load(), UnhandledNotifications: p.gate.droppedNotifications(),
	}
	if rep.Err != nil {
		td.Error = rep.Err.Error()
	}
	owner.Emit(td)
}

// ladder is how an agent is torn down: its dispose graces, and its
// preset's measured early end of the EOF wait (a preset's command
// replaced by the user's keeps it: the preset names the agent it was
// measured on). confined says a sandbox launcher is the group's leader,
// with the agent below it.
func ladder(a *steps.Agent, confined bool) procgroup.Ladder {
	l := procgroup.Ladder{EOFGrace: a.EOFGrace, EOFIdle: a.EOFIdle, TermGrace: a.TermGrace}
	if p, ok := acpagent.LookupPreset(a.Preset); ok && p.EOFLeaderDone {
		l.EOFDoneAt = 1
		if confined {
			l.EOFDoneAt = 2
		}
	}
	return l
}
