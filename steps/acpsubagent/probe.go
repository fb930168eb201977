package acpsubagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// ProbeResult is what an agent said of itself during the handshake.
//
// # Notes
//
// agent_info, agent_capabilities and auth_methods are the JSON the agent
// sent, byte for byte up to whitespace, and absent when it sent nothing:
// decoding them into the SDK's types first would print the defaults the
// protocol implies ("auth": {}, "sessionCapabilities": {}) as if the agent
// had claimed them.
type ProbeResult struct {
	Command         []string        `json:"command"`
	ProtocolVersion int             `json:"protocol_version"`
	AgentInfo       json.RawMessage `json:"agent_info,omitempty"`
	Capabilities    json.RawMessage `json:"agent_capabilities,omitempty"`
	AuthMethods     json.RawMessage `json:"auth_methods,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	// Modes and ConfigOptions are what session/new offered (absent when
	// it offered none): the mode the session starts in, and the options
	// `acpflow agents verify` judges.
	Modes         *acp.SessionModeState     `json:"modes,omitempty"`
	ConfigOptions []acp.SessionConfigOption `json:"config_options,omitempty"`
	SessionError  string                    `json:"session_error,omitempty"`
	Teardown      string                    `json:"teardown"`
	Stderr        string                    `json:"stderr,omitempty"`
	Env           policies.EnvDecision      `json:"-"`
}

// initializeAnswer is the initialize result with the agent's own JSON kept.
type initializeAnswer struct {
	ProtocolVersion   int             `json:"protocolVersion"`
	AgentInfo         json.RawMessage `json:"agentInfo"`
	AgentCapabilities json.RawMessage `json:"agentCapabilities"`
	AuthMethods       json.RawMessage `json:"authMethods"`
}

// Probe spawns an agent with the default env policy, within outer (the
// outer policy; nil: none), runs the handshake of a step (initialize,
// authenticate when agent.Auth is set, session/new) in cwd, and tears it
// down. It returns an error (with what the agent had said
// so far) when the agent cannot be started, exits or closes its stdout
// before answering, sends an answer that is not one, or does not answer
// within agent.StartTimeout. A session/new (or authenticate) that the agent
// refuses with a JSON-RPC error, as most agents do without credentials, is
// reported in SessionError, not as an error: the handshake itself worked.
func Probe(ctx context.Context, agent *steps.Agent, cwd string, ambient map[string]string, outer policies.Outer) (*ProbeResult, error) {
	path, err := exec.LookPath(agent.Command)
	if err != nil {
		return nil, fmt.Errorf("command %q not found in PATH", agent.Command)
	}
	dec, err := outer.BuildEnv(ctx, nil, &policies.EnvRequest{
		Request:  policies.Request{Kind: "env", Agent: agent.Name, Workspace: cwd, Cwd: cwd},
		Ambient:  ambient,
		Explicit: agent.Env,
	})
	var refused *policies.OuterEnvError
	if errors.As(err, &refused) && refused.SetBy == policies.SetByExplicit {
		refused.SetBy = "--env"
	}
	if err != nil {
		return nil, err
	}
	withPWD(dec.Env, agent.Env, cwd)
	ac, err := spawn(nil, procgroup.Spec{Path: path, Args: agent.Args, Env: policies.EnvList(dec.Env), Dir: cwd})
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", path, err)
	}
	res := &ProbeResult{Command: append([]string{agent.Command}, agent.Args...)}
	defer func() {
		ac.gate.close()
		rep := ac.child.Teardown(ladder(agent, false))
		res.Teardown = fmt.Sprintf("%s in %s", rep.Tier, rep.Duration.Round(time.Millisecond))
		if rep.Exit != "" {
			res.Teardown += " (" + rep.Exit + ")"
		}
		res.Stderr = ac.child.Stderr().LastLines(20)
	}()
	ac.connect(ac.handshakeOnly)
	startCtx, cancel := context.WithTimeoutCause(ctx, agent.StartTimeout,
		fmt.Errorf("the agent did not answer within %s", agent.StartTimeout))
	defer cancel()
	p := &probe{child: ac.child, ctx: startCtx}

	var notInitialize error
	sess, err := ac.handshake(startCtx, cwd, agent.Auth, func(raw json.RawMessage) error {
		var init initializeAnswer
		if err := json.Unmarshal(raw, &init); err != nil {
			notInitialize = err
			return err
		}
		res.ProtocolVersion = init.ProtocolVersion
		res.AgentInfo = present(init.AgentInfo)
		res.Capabilities = present(init.AgentCapabilities)
		res.AuthMethods = present(init.AuthMethods)
		return nil
	})
	var re *requestError
	switch {
	case err == nil:
		res.SessionID = string(sess.SessionId)
		res.Modes, res.ConfigOptions = sess.Modes, sess.ConfigOptions
		return res, nil
	case notInitialize != nil:
		return res, fmt.Errorf("initialize: the agent's answer is not an initialize result: %v", notInitialize)
	case !errors.As(err, &re):
		return res, err
	case re.method == "initialize" && p.refused(re.err):
		return res, fmt.Errorf("initialize: the agent refused it: %s", describeRPCError(re.err))
	case re.method == "initialize" || !p.refused(re.err):
		return res, p.failure(re.method, re.err)
	case re.method == "authenticate":
		res.SessionError = "authenticate: " + describeRPCError(re.err)
	default:
		res.SessionError = describeRPCError(re.err)
	}
	return res, nil
}

// handshakeOnly serves an agent whose handshake is all there is: the client
// has nothing to offer, so a request from the agent gets "method not
// found", and an update is only let through the gate.
func (c *agentConn) handshakeOnly(_ context.Context, method string, _ json.RawMessage) (any, *acp.RequestError) {
	if method == acp.ClientMethodSessionUpdate {
		c.gate.handledOne()
		return nil, nil
	}
	return nil, acp.NewMethodNotFound(method)
}

// probe is what a failed handshake is explained from.
type probe struct {
	child *procgroup.Child
	ctx   context.Context
}

// failure words a request that got no answer: the time ran out, the run
// was interrupted, or the agent went away.
func (p *probe) failure(method string, err error) error {
	if p.ctx.Err() != nil {
		return fmt.Errorf("%s: %w", method, context.Cause(p.ctx))
	}
	// The agent closed its stdout; say how it ended if it has.
	select {
	case <-p.child.Exited():
		how := "exit status 0"
		if e := p.child.ExitErr(); e != nil {
			how = e.Error()
		}
		return fmt.Errorf("%s: the agent exited without answering (%s)", method, how)
	case <-time.After(500 * time.Millisecond):
	}
	if isDisconnect(err) {
		return fmt.Errorf("%s: the agent closed its stdout without answering", method)
	}
	return fmt.Errorf("%s: %v", method, err)
}

// refused reports whether err is the agent's own JSON-RPC error answer:
// not the SDK's word that the time ran out or that the connection went away
// before an answer came (both of which it also words as internal errors).
func (p *probe) refused(err error) bool {
	var re *acp.RequestError
	return p.ctx.Err() == nil && errors.As(err, &re) && !isDisconnect(err)
}

// isDisconnect recognises the error the SDK gives every pending request
// when the agent's stdout closes (an internal error whose data says
// "peer disconnected …").
func isDisconnect(err error) bool {
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32603 {
		return false
	}
	data, _ := re.Data.(map[string]any)
	s, _ := data["error"].(string)
	return strings.HasPrefix(s, "peer disconnected")
}

// present returns raw, or nil when the agent sent nothing (or null).
func present(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}
