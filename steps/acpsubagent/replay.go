package acpsubagent

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// modelReplay is a `builtin: replay` attempt whose recording kept its
// model side (docs/gateway.md#replay): the recorded agent runs again, its
// gateway forwarding to the recorded answers instead of the provider.
type modelReplay struct {
	rec    *transcript.Model
	server *gateway.Replay // once the gateway starts
}

// replayModel makes a `builtin: replay` attempt whose recording kept its
// model exchanges run the recorded agent itself, against them. A
// recording without them (or one that cannot be read: the replay agent
// says why) is played as before, the agent's side alone.
func (a *attempt) replayModel() {
	if a.agent.Builtin != replayagent.Name {
		return
	}
	file, step, err := replayagent.Source(a.agent.From, a.inv.StepID)
	if err != nil {
		return
	}
	rec, err := replayagent.Load(file, step)
	if err != nil || rec.Model == nil {
		return
	}
	a.agent = recordedAgent(a.agent, rec.Model)
	a.replay = &modelReplay{rec: rec.Model}
}

// recordedAgent is the agent a recording ran, as the replay's agent
// starts it: the recorded preset, command, args, auth and session
// settings; the replay agent's own env (over the preset's), cwd, sandbox,
// limits and timings; a gateway that records again, so that a replay can
// itself be replayed. A replayed agent is never reused: its gateway
// answers from this recording only.
func recordedAgent(replay *steps.Agent, m *transcript.Model) *steps.Agent {
	ag := *replay
	ag.Builtin, ag.From, ag.Reuse = "", "", false
	ag.Preset, ag.Command, ag.Args, ag.Auth = m.Agent.Preset, m.Agent.Command, m.Agent.Args, m.Agent.Auth
	ag.Mode, ag.Config = m.Agent.Mode, m.Agent.Config
	ag.Env = map[string]string{}
	if p, ok := acpagent.LookupPreset(ag.Preset); ok {
		maps.Copy(ag.Env, p.SetEnv)
		// The preset's measured teardown, unless the replay's agent set its own.
		if p.EOFGrace > 0 && ag.EOFGrace == steps.DefaultEOFGrace {
			ag.EOFGrace = p.EOFGrace
		}
		if p.TermGrace > 0 && ag.TermGrace == steps.DefaultTermGrace {
			ag.TermGrace = p.TermGrace
		}
		if ag.EOFIdle == 0 {
			ag.EOFIdle = p.EOFIdle
		}
	}
	maps.Copy(ag.Env, replay.Env)
	ag.Gateway = &steps.Gateway{API: m.API, Upstream: m.Upstream, BaseURLEnv: m.Agent.BaseURLEnv, KeyEnv: m.Agent.KeyEnv, Record: true}
	ag.GatewaySet = true
	return &ag
}

// replayKey is what the gateway of a replay sends upstream: the recording
// takes any key, so none of the user's is read or needed.
func replayKey() string { return "acpflow-replay-" + rand.Text() }

// start serves the recording and returns the upstream the gateway
// forwards to: the recording's address with the recorded upstream's
// path, which the agent's requests begin with.
func (m *modelReplay) start(plan *gatewayPlan) (*modelReplay, string, error) {
	var answers []gateway.Answer
	for _, x := range m.rec.Exchanges {
		if x.Refused != "" {
			continue // the gateway answered it itself; it will again
		}
		answers = append(answers, gateway.Answer{Method: x.Method, Path: x.Path, Model: x.Model, Status: x.Status,
			ContentType: x.ContentType, Body: x.Response, Cut: x.ResponseTruncated, Request: x.Request})
	}
	srv, err := gateway.StartReplay(plan.wiring.API, answers)
	if err != nil {
		return nil, "", err
	}
	m.server = srv
	path := ""
	if u, err := url.Parse(plan.upstream); err == nil {
		path = strings.TrimSuffix(u.EscapedPath(), "/")
	}
	return m, srv.URL() + path, nil
}

// diverged is the replay's divergence as the step's error: the first
// model request the recording had no answer for (nil: none, or no
// replay).
func (m *modelReplay) diverged() error {
	if m == nil || m.server == nil {
		return nil
	}
	err := m.server.Diverged()
	if err == nil {
		return nil
	}
	if m.rec.Truncated {
		return fmt.Errorf("the replay diverged from the recording: %w (the recording kept only its first %d model exchanges: it reached its size cap)", err, len(m.rec.Exchanges))
	}
	return fmt.Errorf("the replay diverged from the recording: %w", err)
}

// settle warns, after a turn that did not diverge, of recorded model
// requests the agent did not make this time: the turn may still have
// ended as recorded (an agent's background requests depend on timing).
func (m *modelReplay) settle(a *attempt, res *steps.Result) {
	if m == nil || m.server == nil || res.Err != nil {
		return
	}
	if n, first := m.server.Left(); n > 0 {
		a.inv.Emit(steps.Warning{Message: fmt.Sprintf("agent %s: the replay left %d recorded model request(s) unasked, the first %s %s",
			a.agent.Name, n, first.Method, first.Path)})
	}
}

// close stops the recording's server; nil has none.
func (m *modelReplay) close() {
	if m != nil && m.server != nil {
		m.server.Close()
	}
}

// modelAgent is how the attempt's agent was started, as a recording of
// its model side keeps it (args as spawned; scrubbed by the scribe).
func (a *attempt) modelAgent(plan *gatewayPlan, args []string) transcript.ModelAgent {
	return transcript.ModelAgent{Preset: a.agent.Preset, Command: a.agent.Command, Args: args, Auth: a.agent.Auth,
		BaseURLEnv: plan.cfg.BaseURLEnv, KeyEnv: plan.cfg.KeyEnv}
}

// replayNetwork is the sandbox of an agent that plays a recording's
// agent side: `network: gateway` is no network for it, which has no
// gateway and calls no model (the recorded agent of a model replay has
// one and keeps it).
func (a *attempt) replayNetwork(sb *steps.Sandbox) *steps.Sandbox {
	if sb == nil || sb.Network != steps.NetworkGateway || a.agent.Builtin != replayagent.Name {
		return sb
	}
	off := *sb
	off.Network = steps.NetworkOff
	return &off
}
