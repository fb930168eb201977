package acpsubagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/internal/version"
	"github.com/acpflow/acpflow/steps/confine"
)

// agentConn is an agent's process and the ACP connection to it: the start
// path (spawn, initialize, authenticate, session/new) that a step's attempt
// and Probe share, each wording its failures in its own way.
type agentConn struct {
	child *procgroup.Child
	gate  *stdoutGate
	conn  *acp.Connection
	// noise counts lines on the agent's stdout that were not JSON-RPC.
	noise atomic.Int64
}

// spawn starts the agent's process in its own group, in c's sandbox
// (nil: none), with its stdout behind a gate. connect must follow before
// any request.
func spawn(c *confine.Confinement, spec procgroup.Spec) (*agentConn, error) {
	child, err := c.Start(spec)
	if err != nil {
		return nil, err
	}
	return &agentConn{child: child, gate: newStdoutGate(child.Stdout())}, nil
}

// connect opens the ACP connection; handler serves the agent's requests
// and notifications.
//
// # Notes
//
// The connection is the SDK's Connection with our own handler, not its
// ClientSideConnection, whose typed Initialize drops what the agent sent
// beyond the SDK's types and adds the defaults the protocol implies: the
// handshake keeps the agent's initialize answer as sent (probe prints it).
func (c *agentConn) connect(handler acp.MethodHandler) {
	c.connectTapped(handler, nil)
}

// connectTapped is connect with tap seeing every message, both ways (the
// SDK writes each message as one line in one Write).
func (c *agentConn) connectTapped(handler acp.MethodHandler, tap func(dir string, line []byte)) {
	var stdin io.Writer = answerCounter{c.child.Stdin(), c.gate}
	if tap != nil {
		stdin = tapWriter{stdin, tap}
		c.gate.tap = func(line []byte) { tap(transcript.FromAgent, line) }
	}
	// The SDK starts reading in NewConnection, and reads the logger as
	// its reading ends: the gate holds it until SetLogger is done.
	c.gate.hold()
	c.conn = acp.NewConnection(handler, stdin, c.gate)
	c.conn.SetLogger(slog.New(noiseCounter{&c.noise}))
	c.gate.release()
}

// answerCounter tells the gate of each answer written to the agent: the
// requests it has read are held by the SDK until then (maxHeldRequests).
type answerCounter struct {
	w    io.Writer
	gate *stdoutGate
}

// responsePrefix begins every answer the SDK writes (its anyMessage puts
// jsonrpc, then id, then method: a request has a method after its id).
var responsePrefix = []byte(`{"jsonrpc":"2.0","id":`)

func (a answerCounter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	if bytes.HasPrefix(p, responsePrefix) && classify(p) == lineOther {
		a.gate.answerWritten()
	}
	return n, err
}

// tapWriter shows tap each message written to the agent.
type tapWriter struct {
	w   io.Writer
	tap func(dir string, line []byte)
}

func (t tapWriter) Write(p []byte) (int, error) {
	t.tap(transcript.ToAgent, p)
	return t.w.Write(p)
}

// requestError is a request of the start path that failed: its method and
// the SDK's error (or the caller's, from initialized).
type requestError struct {
	method string
	err    error
}

func (e *requestError) Error() string { return e.method + ": " + e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// handshake runs hello and session/new in cwd, bounded by ctx: the whole
// start of a one-off agent (probe).
func (c *agentConn) handshake(ctx context.Context, cwd, auth string, initialized func(json.RawMessage) error) (acp.NewSessionResponse, error) {
	if err := c.hello(ctx, auth, nil, nil, initialized); err != nil {
		return acp.NewSessionResponse{}, err
	}
	return c.newSession(ctx, cwd, nil, nil)
}

// hello runs initialize and authenticate (when auth is set, checked
// against the agent's authMethods, an old name in aliases mapped to
// today's with a warning), bounded by ctx. initialized sees the agent's initialize result as sent, before
// anything else is asked; its error ends the handshake. A failure is a
// *requestError naming the request.
func (c *agentConn) hello(ctx context.Context, auth string, aliases map[string]string, warn func(string), initialized func(json.RawMessage) error) error {
	raw, err := acp.SendRequest[json.RawMessage](c.conn, ctx, acp.AgentMethodInitialize, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{},
		ClientInfo:         &acp.Implementation{Name: "acpflow", Version: version.Version},
	})
	if err == nil {
		err = initialized(raw)
	}
	if err != nil {
		return &requestError{"initialize", err}
	}
	if auth != "" {
		method, err := authMethod(raw, auth, aliases)
		if err != nil {
			return err
		}
		if method != auth && warn != nil {
			warn(fmt.Sprintf("auth %q is the adapter's old name for %q: authenticating with %q (write auth: %s)", auth, method, method, method))
		}
		if _, err := acp.SendRequest[acp.AuthenticateResponse](c.conn, ctx, acp.AgentMethodAuthenticate, acp.AuthenticateRequest{MethodId: method}); err != nil {
			return &requestError{"authenticate", err}
		}
	}
	return nil
}

// authMethod checks the auth: method against the authMethods the agent
// advertised in its initialize answer, before authenticate is called: a
// method it does not offer, or one of its older names (aliases, a
// preset's), would fail inside the agent with words such as "Invalid
// params". An old name maps to today's when the agent offers that.
func authMethod(initialize json.RawMessage, auth string, aliases map[string]string) (string, error) {
	var init struct {
		AuthMethods []struct {
			ID string `json:"id"`
		} `json:"authMethods"`
	}
	_ = json.Unmarshal(initialize, &init) // an answer that does not decode offers nothing
	var offered []string
	for _, m := range init.AuthMethods {
		offered = append(offered, m.ID)
	}
	switch {
	case slices.Contains(offered, auth):
		return auth, nil
	case aliases[auth] != "" && slices.Contains(offered, aliases[auth]):
		return aliases[auth], nil
	case len(offered) == 0:
		return "", fmt.Errorf("the agent offers no authentication methods, so auth %q cannot be used: remove auth: (the agent reads its credentials itself, e.g. from its env)", auth)
	}
	return "", fmt.Errorf("auth %q is not a method the agent offers (offered: %s)", auth, offeredList(offered))
}

// newSession runs session/new in cwd with the given MCP servers (never
// null: ACP requires the list) and _meta (a preset's settings, nil for
// none). A failure is a *requestError.
func (c *agentConn) newSession(ctx context.Context, cwd string, mcp []acp.McpServer, meta map[string]any) (acp.NewSessionResponse, error) {
	if mcp == nil {
		mcp = []acp.McpServer{}
	}
	sess, err := acp.SendRequest[acp.NewSessionResponse](c.conn, ctx, acp.AgentMethodSessionNew, acp.NewSessionRequest{Cwd: cwd, McpServers: mcp, Meta: meta})
	if err != nil {
		return acp.NewSessionResponse{}, &requestError{"session/new", err}
	}
	return sess, nil
}

// exitNote waits briefly for a child whose stdout closed and says how it
// ended, or "" if its stdout is still open.
func (c *agentConn) exitNote() string {
	select {
	case <-c.conn.Done():
	default:
		return ""
	}
	select {
	case <-c.child.Exited():
	case <-time.After(200 * time.Millisecond):
		return "closed its stdout"
	}
	if err := c.child.ExitErr(); err != nil {
		return "exited (" + err.Error() + ")"
	}
	return "exited (status 0)"
}
