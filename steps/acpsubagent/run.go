package acpsubagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/version"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// ErrAbortedBeforeStart is the seed's message for a step cancelled before
// its child was spawned.
var ErrAbortedBeforeStart = errors.New("subagent request was aborted before the ACP child started")

// stderrLinesInError is how many of the child's last stderr lines a failed
// step's error carries.
const stderrLinesInError = 10

// cancelWriteLimit bounds the wait for session/cancel to be written to the
// agent's stdin before teardown closes it.
const cancelWriteLimit = 250 * time.Millisecond

// subagent is one prepared acp-subagent step.
type subagent struct {
	kind  *Kind
	id    string
	agent *steps.Agent
}

var _ steps.Step = (*subagent)(nil)

// attempt is the state of one Run.
type attempt struct {
	*subagent
	inv    *steps.Invocation
	cwd    string
	client *client
	child  *procgroup.Child
	conn   *acp.ClientSideConnection
	// protocolNoise counts lines on the agent's stdout that were not JSON-RPC.
	protocolNoise atomic.Int64
	// updates counts the session/update lines the agent wrote.
	updates *updateCounter
}

// Run runs one attempt: start, prompt, settle, tear down (SPEC §3).
func (s *subagent) Run(ctx context.Context, inv *steps.Invocation) steps.Result {
	a := &attempt{subagent: s, inv: inv}
	res := a.run(ctx)
	if a.child != nil {
		a.teardown()
		res.Stderr = a.child.Stderr().String()
		if res.Err != nil {
			if tail := a.child.Stderr().LastLines(stderrLinesInError); tail != "" {
				res.Err = fmt.Errorf("%w\nagent stderr (last lines):\n%s", res.Err, indent(tail))
			}
		}
	}
	if a.client != nil {
		if res.StopReason != steps.Completed && a.conn != nil {
			a.client.quiesce(a.conn.Done(), a.updates, 250*time.Millisecond)
		}
		res.Output, res.Permissions = a.client.snapshot()
	}
	if res.StopReason == "" {
		res.StopReason = steps.Error
	}
	return res
}

func (a *attempt) run(ctx context.Context) steps.Result {
	if ctx.Err() != nil {
		return steps.Result{StopReason: steps.Aborted, Err: ErrAbortedBeforeStart}
	}
	cwd, err := resolveCwd(a.inv, a.agent)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	a.cwd = cwd
	env, err := a.buildEnv(ctx)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	path, args, err := a.command()
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	if ctx.Err() != nil {
		return steps.Result{StopReason: steps.Aborted, Err: ErrAbortedBeforeStart}
	}

	startCtx, cancelStart := context.WithTimeoutCause(ctx, a.agent.StartTimeout,
		fmt.Errorf("agent %s did not start within %s (start-timeout)", a.agent.Name, a.agent.StartTimeout))
	defer cancelStart()

	a.child, err = procgroup.Start(procgroup.Spec{Path: path, Args: args, Env: policies.EnvList(env), Dir: cwd})
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("agent %s: cannot start %s: %w", a.agent.Name, path, err)}
	}
	a.client = &client{inv: a.inv, cwd: cwd}
	a.updates = &updateCounter{r: a.child.Stdout()}
	a.conn = acp.NewClientSideConnection(a.client, a.child.Stdin(), a.updates)
	a.conn.SetLogger(slog.New(noiseCounter{&a.protocolNoise}))
	a.emit("step_update", map[string]any{"kind": "spawned", "pid": a.child.Pid(), "start_ticks": a.child.StartTicks(), "cwd": cwd})

	sessionID, err := a.start(startCtx)
	if err != nil {
		if ctx.Err() != nil {
			return steps.Result{StopReason: steps.Aborted, Err: fmt.Errorf("aborted while the ACP child was starting: %w", context.Cause(ctx))}
		}
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	cancelStart()
	a.client.setSession(sessionID)
	a.emit("step_update", map[string]any{"kind": "session", "session_id": sessionID})

	res := a.prompt(ctx, sessionID)
	res.SessionID = sessionID
	return res
}

// start runs initialize, authenticate (when configured) and session/new,
// all bounded by ctx (the start-timeout). It returns the session id.
func (a *attempt) start(ctx context.Context) (string, error) {
	init, err := a.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{},
		ClientInfo:         &acp.Implementation{Name: "acpflow", Version: version.Version},
	})
	if err != nil {
		return "", a.startError(ctx, "initialize", err)
	}
	info := map[string]any{"kind": "initialized", "protocol_version": init.ProtocolVersion}
	if init.AgentInfo != nil {
		info["agent_name"], info["agent_version"] = init.AgentInfo.Name, init.AgentInfo.Version
	}
	a.emit("step_update", info)
	if a.agent.Auth != "" {
		if _, err := a.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: a.agent.Auth}); err != nil {
			return "", a.startError(ctx, "authenticate", err)
		}
	}
	sess, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return "", a.startError(ctx, "session/new", err)
	}
	if sess.SessionId == "" {
		return "", errors.New("ACP child published without a session id")
	}
	return string(sess.SessionId), nil
}

// startError words a failure of one start request: a timeout, the child's
// death, or the agent's own error (e.g. "Authentication required").
func (a *attempt) startError(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%w: no answer to %s", cause, method)
		}
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if exited := a.exitNote(); exited != "" {
		return fmt.Errorf("agent %s %s during %s", a.agent.Name, exited, method)
	}
	return fmt.Errorf("agent %s: %s failed: %s", a.agent.Name, method, describeRPCError(err))
}

// exitNote waits briefly for a child whose stdout closed and says how it
// ended, or "" if it is still running.
func (a *attempt) exitNote() string {
	select {
	case <-a.conn.Done():
	default:
		return ""
	}
	select {
	case <-a.child.Exited():
	case <-time.After(200 * time.Millisecond):
		return "closed its stdout"
	}
	if err := a.child.ExitErr(); err != nil {
		return "exited (" + err.Error() + ")"
	}
	return "exited (status 0)"
}

// prompt sends the one session/prompt and waits for the turn to end or ctx
// to be cancelled; on cancel it sends session/cancel and settles at once.
func (a *attempt) prompt(ctx context.Context, sessionID string) steps.Result {
	text, _ := a.inv.With["prompt"].(string)
	type answer struct {
		resp acp.PromptResponse
		err  error
	}
	// The prompt's own context is never cancelled: cancelling it would make
	// the SDK send $/cancel_request and a second session/cancel. A cancel
	// is the one session/cancel sent below; teardown closes the connection,
	// which ends the request.
	done := make(chan answer, 1)
	go func() {
		resp, err := a.conn.Prompt(context.Background(), acp.PromptRequest{
			SessionId: acp.SessionId(sessionID),
			Prompt:    []acp.ContentBlock{acp.TextBlock(text)},
		})
		done <- answer{resp, err}
	}()

	select {
	case ans := <-done:
		if ans.err != nil {
			if exited := a.exitNote(); exited != "" {
				return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("agent %s %s during session/prompt", a.agent.Name, exited)}
			}
			return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("agent %s: session/prompt failed: %s", a.agent.Name, describeRPCError(ans.err))}
		}
		return settle(ans.resp.StopReason)
	case <-ctx.Done():
		a.client.markCancelled()
		// Best effort, and bounded: an agent that does not read its stdin
		// (a full pipe) must not hold the step; teardown closes the pipe.
		sent := make(chan struct{})
		go func() {
			a.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: acp.SessionId(sessionID)})
			close(sent)
		}()
		select {
		case <-sent:
		case <-time.After(cancelWriteLimit):
		}
		a.emit("step_update", map[string]any{"kind": "cancel_sent"})
		return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
	}
}

// settle maps an ACP stop reason to the step's (SPEC §3.4).
func settle(r acp.StopReason) steps.Result {
	switch r {
	case acp.StopReasonEndTurn:
		return steps.Result{StopReason: steps.Completed}
	case acp.StopReasonMaxTokens:
		return steps.Result{StopReason: steps.MaxTokens, Err: errors.New("the agent stopped: max_tokens")}
	case acp.StopReasonRefusal:
		return steps.Result{StopReason: steps.Refusal, Err: errors.New("the agent refused")}
	case acp.StopReasonCancelled:
		return steps.Result{StopReason: steps.Aborted, Err: errors.New("the agent cancelled the turn")}
	case acp.StopReasonMaxTurnRequests:
		return steps.Result{StopReason: steps.Error, Err: errors.New("the agent stopped: max_turn_requests")}
	}
	return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("the agent stopped with unknown stop reason %q", string(r))}
}

// teardown runs the ladder and records how it ended.
func (a *attempt) teardown() {
	rep := a.child.Teardown(ladder(a.agent))
	fields := map[string]any{"kind": "teardown", "pid": a.child.Pid(), "tier": rep.Tier, "duration_ms": rep.Duration.Milliseconds()}
	if rep.Escaped > 0 {
		fields["escaped_killed"] = rep.Escaped
	}
	if rep.Err != nil {
		fields["error"] = rep.Err.Error()
	}
	if n := a.protocolNoise.Load(); n > 0 {
		fields["non_protocol_lines"] = n
	}
	a.emit("step_update", fields)
}

// ladder is how an agent is torn down.
func ladder(a *steps.Agent) procgroup.Ladder {
	return procgroup.Ladder{EOFGrace: a.EOFGrace, EOFIdle: a.EOFIdle, TermGrace: a.TermGrace}
}

// command resolves what to spawn. A builtin agent is acpflow's own
// executable, so the demo agent is a real subprocess like any other.
func (a *attempt) command() (string, []string, error) {
	if a.agent.Builtin != "" {
		return a.kind.Self, append(append([]string(nil), a.kind.SelfArgs...), a.agent.Builtin), nil
	}
	args := make([]string, len(a.agent.Args))
	for i, arg := range a.agent.Args {
		r, err := a.render(arg)
		if err != nil {
			return "", nil, fmt.Errorf("agents.%s.args[%d]: %w", a.agent.Name, i, err)
		}
		args[i] = r
	}
	path, err := exec.LookPath(a.agent.Command)
	if err != nil {
		if strings.ContainsRune(a.agent.Command, os.PathSeparator) {
			return "", nil, fmt.Errorf("agents.%s: command %q: %w", a.agent.Name, a.agent.Command, errors.Unwrap(err))
		}
		return "", nil, fmt.Errorf("agents.%s: command %q not found in PATH", a.agent.Name, a.agent.Command)
	}
	return path, args, nil
}

func (a *attempt) render(s string) (string, error) {
	if a.inv.Render == nil {
		return s, nil
	}
	return a.inv.Render(s)
}

// buildEnv asks the env policy for the child's environment, failing closed.
func (a *attempt) buildEnv(ctx context.Context) (map[string]string, error) {
	explicit := map[string]string{}
	for k, v := range a.agent.Env {
		r, err := a.render(v)
		if err != nil {
			return nil, fmt.Errorf("agents.%s.env.%s: %w", a.agent.Name, k, err)
		}
		explicit[k] = r
	}
	switch env := a.inv.With["env"].(type) {
	case map[string]any:
		for k, v := range env {
			explicit[k] = fmt.Sprint(v)
		}
	case map[string]string:
		for k, v := range env {
			explicit[k] = v
		}
	}
	req := &policies.EnvRequest{
		Request: policies.Request{Kind: "env", Workflow: a.inv.Workflow, RunID: a.inv.RunID, Step: a.inv.StepID,
			Agent: a.agent.Name, Workspace: a.inv.Workspace, Cwd: a.cwd},
		Ambient:  a.inv.Ambient,
		Explicit: explicit,
	}
	dec, err := policies.BuildEnv(ctx, a.inv.Env, req)
	if err != nil {
		return nil, fmt.Errorf("env policy (%s) failed, spawn refused: %w", a.inv.EnvSource, err)
	}
	if dec.Deny != "" {
		return nil, fmt.Errorf("env policy (%s) refused the spawn: %s", a.inv.EnvSource, dec.Deny)
	}
	names := make([]string, 0, len(dec.Env))
	for k := range dec.Env {
		names = append(names, k)
	}
	fields := map[string]any{"kind": "env", "policy": string(a.inv.EnvSource), "rule": dec.Rule, "names": len(names)}
	if dec.Stderr != "" {
		fields["policy_stderr"] = dec.Stderr
	}
	a.emit("step_update", fields)
	return dec.Env, nil
}

func (a *attempt) emit(typ string, fields map[string]any) {
	a.inv.Events.Emit(steps.Event{Type: typ, RunID: a.inv.RunID, Step: a.inv.StepID, Time: time.Now(), Fields: fields})
}

func agentName(inv *steps.Invocation) string {
	s, _ := inv.With["agent"].(string)
	return s
}

// describeRPCError turns an SDK error into the agent's own words where it
// sent some ("Authentication required"), not a JSON blob.
func describeRPCError(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s (code %d)", re.Message, re.Code)
		if re.Data != nil {
			msg += fmt.Sprintf(": %v", re.Data)
		}
		return msg
	}
	return err.Error()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// noiseCounter is the SDK's logger: it counts what the SDK could not parse
// (non-JSON lines on the agent's stdout) instead of printing it, since those
// lines may carry anything the agent printed, secrets included.
type noiseCounter struct{ n *atomic.Int64 }

func (h noiseCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h noiseCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "parse") {
		h.n.Add(1)
	}
	return nil
}
func (h noiseCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h noiseCounter) WithGroup(string) slog.Handler      { return h }
