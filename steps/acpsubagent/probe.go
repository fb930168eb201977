package acpsubagent

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/version"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// ProbeResult is what an agent said of itself during the handshake.
type ProbeResult struct {
	Command         []string              `json:"command"`
	ProtocolVersion int                   `json:"protocol_version"`
	AgentInfo       *acp.Implementation   `json:"agent_info,omitempty"`
	Capabilities    acp.AgentCapabilities `json:"agent_capabilities"`
	AuthMethods     []acp.AuthMethod      `json:"auth_methods"`
	SessionID       string                `json:"session_id,omitempty"`
	SessionError    string                `json:"session_error,omitempty"`
	Teardown        string                `json:"teardown"`
	Stderr          string                `json:"stderr,omitempty"`
	Env             policies.EnvDecision  `json:"-"`
}

// Probe spawns an agent with the default env policy, runs initialize and
// session/new in cwd, and tears it down. A session/new failure (most agents
// need credentials) is reported in the result, not as an error: the
// handshake itself worked.
func Probe(ctx context.Context, agent *steps.Agent, cwd string, ambient map[string]string) (*ProbeResult, error) {
	path, err := exec.LookPath(agent.Command)
	if err != nil {
		return nil, fmt.Errorf("command %q not found in PATH", agent.Command)
	}
	dec, err := policies.BuildEnv(ctx, nil, &policies.EnvRequest{
		Request:  policies.Request{Kind: "env", Agent: agent.Name, Workspace: cwd, Cwd: cwd},
		Ambient:  ambient,
		Explicit: agent.Env,
	})
	if err != nil {
		return nil, err
	}
	child, err := procgroup.Start(procgroup.Spec{Path: path, Args: agent.Args, Env: policies.EnvList(dec.Env), Dir: cwd})
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", path, err)
	}
	res := &ProbeResult{Command: append([]string{agent.Command}, agent.Args...)}
	defer func() {
		rep := child.Teardown(ladder(agent))
		res.Teardown = fmt.Sprintf("%s in %s", rep.Tier, rep.Duration.Round(1e6))
		res.Stderr = child.Stderr().LastLines(20)
	}()
	conn := acp.NewClientSideConnection(&client{inv: &steps.Invocation{Events: steps.Discard{}}}, child.Stdin(), child.Stdout())
	conn.SetLogger(slog.New(noiseCounter{new(atomic.Int64)}))
	startCtx, cancel := context.WithTimeoutCause(ctx, agent.StartTimeout,
		fmt.Errorf("the agent did not answer within %s (start-timeout)", agent.StartTimeout))
	defer cancel()
	init, err := conn.Initialize(startCtx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo:      &acp.Implementation{Name: "acpflow", Version: version.Version},
	})
	if err != nil {
		if cause := context.Cause(startCtx); cause != nil && startCtx.Err() != nil {
			return res, fmt.Errorf("initialize: %w", cause)
		}
		return res, fmt.Errorf("initialize failed: %s", describeRPCError(err))
	}
	res.ProtocolVersion = int(init.ProtocolVersion)
	res.AgentInfo = init.AgentInfo
	res.Capabilities = init.AgentCapabilities
	res.AuthMethods = init.AuthMethods
	if agent.Auth != "" {
		if _, err := conn.Authenticate(startCtx, acp.AuthenticateRequest{MethodId: agent.Auth}); err != nil {
			res.SessionError = "authenticate: " + describeRPCError(err)
			return res, nil
		}
	}
	sess, err := conn.NewSession(startCtx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		res.SessionError = describeRPCError(err)
		if cause := context.Cause(startCtx); cause != nil && startCtx.Err() != nil {
			res.SessionError = cause.Error()
		}
		return res, nil
	}
	res.SessionID = string(sess.SessionId)
	return res, nil
}
