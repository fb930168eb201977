package acpsubagent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// maxBookedSessions bounds the sessions a process remembers the step of: a
// pooled agent may serve a whole batch.
const maxBookedSessions = 1024

// answerLimit bounds the wait, at teardown, for the permission requests the
// agent sent to be answered and recorded (gate.awaitAnswers).
const answerLimit = time.Second

// sessionBook is what a process knows of its sessions beyond the routing
// table (proc.clients): the step whose session each one has been, those
// kept for a later step, and the attempts using the process now. A
// permission request that no turn's client takes is answered `cancelled`
// and recorded from it (answerUnowned), and an agent's new session id is
// checked against it (claimSession).
//
// # Notes
//
// Its lock is a leaf: nothing else is locked while it is held.
type sessionBook struct {
	mu    sync.Mutex
	users []*user // oldest first
	steps map[acp.SessionId]sessionOf
	order []acp.SessionId       // of steps, oldest first, to bound it
	kept  map[acp.SessionId]int // how many steps' kept entries hold each session
}

// sessionOf is the step (of a run) whose session a session was, last.
type sessionOf struct{ run, step string }

// user is an attempt using the process: from the moment it has the process
// until its turn has ended.
type user struct {
	inv    *steps.Invocation
	cwd    string
	client *client                     // once the attempt's session is routed
	early  []policies.PermissionRecord // answered before that
}

// use registers an attempt that has the process now.
func (b *sessionBook) use(inv *steps.Invocation, cwd string) {
	b.mu.Lock()
	b.users = append(b.users, &user{inv: inv, cwd: cwd})
	b.mu.Unlock()
}

// leave unregisters the attempt of inv, whose turn has ended, and returns
// the records answered for it before its session was open.
func (b *sessionBook) leave(inv *steps.Invocation) []policies.PermissionRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, u := range b.users {
		if u.inv == inv {
			b.users = slices.Delete(b.users, i, i+1)
			return u.early
		}
	}
	return nil
}

// routed notes that session id is c's step's from now on.
func (b *sessionBook) routed(id acp.SessionId, c *client) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.users {
		if u.inv == c.inv {
			u.client = c
		}
	}
	if b.steps == nil {
		b.steps = map[acp.SessionId]sessionOf{}
	}
	if _, seen := b.steps[id]; !seen {
		b.order = append(b.order, id)
	}
	b.steps[id] = sessionOf{run: c.inv.RunID, step: c.inv.StepID}
	if len(b.order) > maxBookedSessions {
		delete(b.steps, b.order[0])
		b.order = b.order[1:]
	}
}

// keep and unkeep mark a session kept, and no longer kept, for the steps
// that will continue it (sessions.go): a session a step continues may be
// kept again for the next.
func (b *sessionBook) keep(id acp.SessionId) {
	b.mu.Lock()
	if b.kept == nil {
		b.kept = map[acp.SessionId]int{}
	}
	b.kept[id]++
	b.mu.Unlock()
}

func (b *sessionBook) unkeep(id acp.SessionId) {
	b.mu.Lock()
	if n := b.kept[id] - 1; n > 0 {
		b.kept[id] = n
	} else {
		delete(b.kept, id) // a no-op on a nil map
	}
	b.mu.Unlock()
}

// sessionOf is the step whose session id has been on this process, and
// whether it is kept for a later one.
func (b *sessionBook) sessionOf(id acp.SessionId) (of sessionOf, kept, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	of, ok = b.steps[id]
	return of, b.kept[id] > 0, ok
}

// latest is the attempt that began using the process last, and its client
// (nil before its session is routed); nil when none uses it.
func (b *sessionBook) latest() (*user, *client) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.users) == 0 {
		return nil, nil
	}
	u := b.users[len(b.users)-1]
	return u, u.client
}

// addEarly records rec for u before its session is open; false when u has
// left meanwhile.
func (b *sessionBook) addEarly(u *user, rec policies.PermissionRecord) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.users, u) {
		return false
	}
	u.early = append(u.early, rec)
	return true
}

// answerUnowned answers a permission request for a session that no turn's
// client owns: `cancelled`, without asking a policy (the policy of which
// step?), recorded where a user looks for it. A request for a step's
// session that is between turns or whose turn ended is the run's; one for
// a session the process never had is the step's that is using the process
// (before its own session is open, or during its turn), else the run's.
func (p *proc) answerUnowned(ctx context.Context, r acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	of, kept, known := p.book.sessionOf(r.SessionId)
	u, uc := p.book.latest()
	if !known && uc != nil {
		// During the step's turn: its client records the request as one
		// for another session.
		resp, _ := uc.RequestPermission(ctx, r)
		return resp
	}
	p.mu.Lock()
	inv, cwd := p.owner, ""
	p.mu.Unlock()
	if u != nil {
		inv, cwd = u.inv, u.cwd
	}
	if cwd == "" {
		cwd = inv.Workspace
	}
	req := acpagent.FromACP(policies.Request{Workflow: inv.Workflow, RunID: inv.RunID, Step: inv.StepID,
		Agent: agentName(inv), Workspace: inv.Workspace, Cwd: cwd}, r)
	sid := quotedSession(r.SessionId)
	rule, reason := policies.RuleOtherSession, fmt.Sprintf("request for session %s, which no step has open", sid)
	switch {
	case known && kept:
		rule, reason = policies.RuleBetweenTurns, fmt.Sprintf("request for the session of step %s (%s), kept for a later step, between turns", of.describe(inv), sid)
	case known:
		rule, reason = policies.RuleTurnEnded, fmt.Sprintf("request for the session of step %s (%s) after its turn ended", of.describe(inv), sid)
	case u != nil:
		rec := answeredItself(req, inv.PermissionSource, policies.RuleSessionNotOpen,
			fmt.Sprintf("request for session %s before the step's own session was open", sid))
		if p.book.addEarly(u, rec) {
			inv.Emit(steps.Permission{PermissionRecord: rec})
			return answerOf(rec)
		}
		// The step has left meanwhile: the request is the run's.
	}
	rec := answeredItself(req, inv.PermissionSource, rule, reason)
	recordForRun(inv, rec)
	return answerOf(rec)
}

// describe names the step, and its run when it is not inv's (a pooled
// agent serves the runs of a batch).
func (s sessionOf) describe(inv *steps.Invocation) string {
	if s.run != inv.RunID {
		return s.step + " of run " + s.run
	}
	return s.step
}

// maxSessionID bounds an agent's session id: acpflow routes by it, keeps
// it in the step's result and the run store, and shows it.
const maxSessionID = 1024

// claimSession checks the id the agent answered method (session/new or
// session/fork) with: a session of the step's own, never one the process
// gave a step before, the one forked, or (for a fork) one another step of
// the run had. Routing is by session id, so a shared id would make one
// step's policy answer the other's requests. A fresh id is booked for the
// step in the run. An id longer than maxSessionID fails the step too.
//
// # Notes
//
// session/new is checked against the process alone: agents that number
// their sessions from 1 in each process give two processes the same ids,
// and a process routes only its own.
func (a *attempt) claimSession(method string, id, forked acp.SessionId) error {
	if len(id) > maxSessionID {
		return fmt.Errorf("agent %s answered %s with a session id of %d bytes, more than the %d acpflow keeps: this step fails",
			a.agent.Name, method, len(id), maxSessionID)
	}
	whose := ""
	of, kept, known := a.p.book.sessionOf(id)
	reg := runSessions(a.inv)
	switch {
	case forked != "" && id == forked:
		whose = fmt.Sprintf("is the session it was asked to fork (step %s's)", a.from)
	case known && a.p.client(id) != nil:
		whose = fmt.Sprintf("is step %s's session, in use on the same process", of.describe(a.inv))
	case known && kept:
		whose = fmt.Sprintf("is step %s's session, kept on the same process for a later step", of.describe(a.inv))
	case known:
		whose = fmt.Sprintf("the same process gave step %s before", of.describe(a.inv))
	case method == acp.AgentMethodSessionFork && reg != nil:
		if step, ok := reg.ownerOf(id); ok && step != a.inv.StepID {
			whose = fmt.Sprintf("step %s had earlier in the run", step)
		}
	}
	if whose != "" {
		return fmt.Errorf("agent %s answered %s with session id %s, which %s: each step needs a session of its own, so this step fails",
			a.agent.Name, method, quotedSession(id), whose)
	}
	if reg != nil {
		reg.own(id, a.inv.StepID)
	}
	return nil
}

// answeredItself is the record of a request acpflow answers `cancelled`
// without asking a policy, with the rule and reason that say why. No
// bound was checked on such a request, so the record keeps a bounded part
// of what it says (recordText).
func answeredItself(req *policies.PermissionRequest, src policies.Source, rule, reason string) policies.PermissionRecord {
	return policies.PermissionRecord{
		ToolCallID: recordText(req.Tool.ID), Kind: recordText(req.Tool.Kind), Title: recordText(req.Tool.Title),
		Command: recordText(req.Tool.Command), Locations: recordLocations(req.Tool.Locations),
		Decision: policies.Cancel, Outcome: policies.OutcomeCancelled, Layer: policies.LayerWorkflow, Policy: src,
		Rule: rule, Reason: reason,
	}
}

// answerOf is the answer the agent receives for rec.
func answerOf(rec policies.PermissionRecord) acp.RequestPermissionResponse {
	if rec.Outcome == policies.OutcomeSelected {
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
			Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(rec.OptionID)},
		}}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Cancelled: &acp.RequestPermissionOutcomeCancelled{},
	}}
}

// recordForRun records rec as the run's own, not a step's: a `permission`
// event without a step, which the engine keeps in the run's result
// (engine.RunResult.Permissions) and the run store in the run's events.
func recordForRun(inv *steps.Invocation, rec policies.PermissionRecord) {
	if inv == nil || inv.Events == nil {
		return
	}
	inv.Events.Emit(steps.Event{RunID: inv.RunID, Time: time.Now(), Data: steps.Permission{PermissionRecord: rec}})
}

// quotedSession is an agent's session id as a reason or an error shows
// it: quoted, escaped and bounded, a cut one saying so.
func quotedSession(id acp.SessionId) string {
	return termtext.Quote(string(id), 80)
}

func joinReasons(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
