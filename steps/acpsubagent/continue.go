package acpsubagent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// How a step came by its session, as its `session` event says (a new
// session says nothing).
const (
	viaLive   = "continued" // the earlier step's live process and session
	viaResume = "resumed"   // a fresh process, session/resume
	viaLoad   = "loaded"    // a fresh process, session/load
	viaFork   = "forked"    // session/fork of the earlier step's session
)

// loadQuietLimit bounds the wait, after session/load answered, for the
// history the agent replayed to be handled (and dropped): the step's
// output is what the agent says now.
const loadQuietLimit = time.Second

// continueSession gives the step the session of the step it continues
// (`session: STEP`), or a branch of it (`fork: true`): on that step's
// process while it lives, else on a fresh one through session/resume or
// session/load (for a fork, session/fork), whichever the agent advertises.
//
// A step that continues (not forks) a live session holds its turn until
// its own turn ends: one session takes one prompt at a time.
func (a *attempt) continueSession(ctx, startCtx context.Context) error {
	reg := runSessions(a.inv)
	var k *kept
	if reg != nil {
		k = reg.lookup(a.from)
	}
	if k != nil && !a.fork {
		k.turn.Lock()
		a.unlock = k.turn.Unlock
	}
	if ctx.Err() != nil {
		return ErrAbortedBeforeStart
	}
	if k != nil {
		a.kept = k
		if p := reg.take(k, a.inv); p != nil {
			a.p = p
			p.book.use(a.inv, a.cwd)
			a.scribe.Add(p.secrets)
			p.listen(a.scribe)
			a.useGateway(p)
			if a.fork {
				return a.forkSession(startCtx, k.sessionID, true)
			}
			settings, err := a.sessionSettings(true)
			if err != nil {
				return err
			}
			a.offered = k.offered
			a.opened(k.sessionID, viaLive)
			return a.configure(startCtx, a.sessionID, a.offered, settings)
		}
	}

	// The process is gone: a fresh one picks the session up by its id.
	var sid acp.SessionId
	if k != nil {
		sid = k.sessionID
	} else if a.inv.SessionOf != nil {
		sid = acp.SessionId(a.inv.SessionOf(a.from))
	}
	if sid == "" {
		return fmt.Errorf("step %s has no session to continue: it recorded none", a.from)
	}
	if err := a.obtain(ctx, startCtx); err != nil {
		return err
	}
	if a.fork {
		return a.forkSession(startCtx, sid, false)
	}
	settings, err := a.sessionSettings(false)
	if err != nil {
		return err
	}
	if err := a.reopen(startCtx, sid); err != nil {
		return err
	}
	return a.configure(startCtx, a.sessionID, a.offered, settings)
}

// reopen opens session sid on a fresh process, by session/resume when
// the agent advertises it, else by session/load, and takes what the agent
// offers for it (modes, config options).
func (a *attempt) reopen(startCtx context.Context, sid acp.SessionId) error {
	sc := a.p.caps.SessionCapabilities
	switch {
	case sc.Resume != nil:
		resp, err := acp.SendRequest[acp.ResumeSessionResponse](a.p.conn, startCtx, acp.AgentMethodSessionResume,
			acp.ResumeSessionRequest{SessionId: sid, Cwd: a.cwd, McpServers: nonNil(a.mcp), Meta: presetMeta(a.agent)})
		if err != nil {
			return a.startError(startCtx, acp.AgentMethodSessionResume, err)
		}
		a.offered = offered{modes: resp.Modes, options: resp.ConfigOptions}
		a.p.opened(sid)
		a.opened(sid, viaResume)
	case a.p.caps.LoadSession:
		// The agent replays the session's history as updates before it
		// answers; no client owns the session yet, so they are dropped.
		resp, err := acp.SendRequest[acp.LoadSessionResponse](a.p.conn, startCtx, acp.AgentMethodSessionLoad,
			acp.LoadSessionRequest{SessionId: sid, Cwd: a.cwd, McpServers: nonNil(a.mcp), Meta: presetMeta(a.agent)})
		if err != nil {
			return a.startError(startCtx, acp.AgentMethodSessionLoad, err)
		}
		a.p.opened(sid)
		a.p.gate.awaitHandled(loadQuietLimit)
		a.offered = offered{modes: resp.Modes, options: resp.ConfigOptions}
		a.opened(sid, viaLoad)
	default:
		return fmt.Errorf("agent %s cannot continue the session of step %s: its process is gone and the agent advertises neither session/resume nor loadSession", a.agent.Name, a.from)
	}
	return nil
}

// forkSession branches session sid on the step's process: the step gets
// a session of its own that starts from the earlier step's conversation.
// On the earlier step's live process (live), only the step's own mode and
// config are set: the agent's are the session's already.
func (a *attempt) forkSession(ctx context.Context, sid acp.SessionId, live bool) error {
	if a.p.caps.SessionCapabilities.Fork == nil {
		return fmt.Errorf("agent %s cannot fork the session of step %s: it does not advertise session/fork", a.agent.Name, a.from)
	}
	settings, err := a.sessionSettings(live)
	if err != nil {
		return err
	}
	resp, err := acp.SendRequest[acp.UnstableForkSessionResponse](a.p.conn, ctx, acp.AgentMethodSessionFork,
		acp.UnstableForkSessionRequest{SessionId: sid, Cwd: a.cwd, McpServers: unstableServers(a.mcp), Meta: presetMeta(a.agent)})
	if err != nil {
		return a.startError(ctx, acp.AgentMethodSessionFork, err)
	}
	if resp.SessionId == "" {
		return fmt.Errorf("agent %s answered session/fork without a session id", a.agent.Name)
	}
	if err := a.claimSession(acp.AgentMethodSessionFork, resp.SessionId, sid); err != nil {
		return err
	}
	a.offered = forkOffered(resp)
	a.p.opened(resp.SessionId)
	a.opened(resp.SessionId, viaFork)
	return a.configure(ctx, a.sessionID, a.offered, settings)
}

// nonNil is servers, or an empty list: ACP requires the list.
func nonNil(servers []acp.McpServer) []acp.McpServer {
	if servers == nil {
		return []acp.McpServer{}
	}
	return servers
}

// unstableServers is servers in the SDK's unstable type of the same JSON,
// which session/fork takes.
func unstableServers(servers []acp.McpServer) []acp.UnstableMcpServer {
	if len(servers) == 0 {
		return nil
	}
	var out []acp.UnstableMcpServer
	if b, err := json.Marshal(servers); err == nil {
		_ = json.Unmarshal(b, &out) // the same schema: what does not decode is not sent
	}
	return out
}
