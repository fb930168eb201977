// Package demoagent is acpflow's built-in deterministic ACP agent (docs/acp-subagent.md#the-demo-agent), served on stdio by
// `acpflow agent demo`. It needs no model, no network and no key: it answers a prompt by echoing
// it back in several chunks, and asks permission for every `tool: KIND TITLE` line of the prompt,
// which makes it the agent of the README's first run, of acpflow's end-to-end tests and of trying
// policies offline.
//
// It is an ordinary ACP agent built on the SDK's AgentSideConnection, so it also shows what a
// well-behaved agent sends: a thought and a plan (which a client must keep out of its output),
// tool calls with their updates, permission requests, and message chunks.
package demoagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/version"
)

// Name is the agentInfo name the demo agent reports in its initialize answer.
const Name = "acpflow-demo"

// Serve runs the demo agent over one ACP connection: it reads JSON-RPC messages from in (the
// client's requests, one per line) and writes its answers and updates to out. It returns nil
// when in reaches EOF (the client closed the agent's stdin), or ctx.Err() when ctx ends first.
//
// # Notes
//
//   - Serve neither closes in nor out: the caller owns them. When ctx ends first, the SDK's
//     reader goroutine stays blocked on in until the caller closes it (or the process exits).
//   - A prompt in flight when Serve returns is cancelled; its answer may or may not be written.
//   - Diagnostics of the connection are discarded, so that nothing but protocol reaches out and
//     nothing unasked reaches stderr.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	a := &agent{serveCtx: ctx, sessions: make(map[acp.SessionId]*session)}
	// The SDK starts reading in its constructor, and neither its logger nor a.conn may be set
	// once it reads: the gate holds its first read until both are.
	gate := make(chan struct{})
	conn := acp.NewAgentSideConnection(a, out, gatedReader{in, gate})
	conn.SetLogger(slog.New(slog.DiscardHandler))
	a.conn = conn
	close(gate)

	select {
	case <-conn.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedReader reads from r once gate is closed.
type gatedReader struct {
	r    io.Reader
	gate <-chan struct{}
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}

var _ acp.Agent = (*agent)(nil)

// agent implements acp.Agent. Its only state is the sessions it created; everything a turn
// says is derived from the prompt, so that the same prompt always gives the same answer.
type agent struct {
	serveCtx context.Context
	conn     *acp.AgentSideConnection

	mu       sync.Mutex
	sessions map[acp.SessionId]*session
}

// session is what the agent remembers of one session/new.
type session struct {
	id  acp.SessionId
	cwd string

	mu         sync.Mutex
	calls      int                // tool calls made so far in the session, for unique ids
	cancelTurn context.CancelFunc // the turn in flight, if any
}

func (s *session) nextToolCallID() acp.ToolCallId {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return acp.ToolCallId(fmt.Sprintf("call_%d", s.calls))
}

func (a *agent) session(id acp.SessionId) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

// Initialize answers protocol version 1, the demo's name with acpflow's version, and no auth
// methods.
func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: Name, Version: version.Version},
		AuthMethods:     []acp.AuthMethod{},
	}, nil
}

// Authenticate succeeds whatever the method: the demo has nothing to log in to.
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession remembers the session's cwd, against which relative paths of tool lines resolve.
func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{
			"cwd": p.Cwd, "error": "cwd must be an absolute path",
		})
	}
	id, err := newSessionID()
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[id] = &session{id: id, cwd: filepath.Clean(p.Cwd)}
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: id}, nil
}

// Prompt runs one turn (see turn.go). A session/cancel, or the end of Serve's ctx, ends it with
// stop reason cancelled.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s := a.session(p.SessionId)
	if s == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{
			"sessionId": p.SessionId, "error": "unknown session: call session/new first",
		})
	}

	// The SDK already cancels ctx on session/cancel; the turn's own cancel also covers the end
	// of Serve and a Cancel that an SDK version might deliver without cancelling ctx.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.serveCtx, cancel)()
	s.mu.Lock()
	s.cancelTurn = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancelTurn = nil
		s.mu.Unlock()
	}()

	t := &turn{conn: a.conn, session: s, prompt: promptText(p.Prompt)}
	if err := t.run(ctx); err != nil {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	if ctx.Err() != nil {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// Cancel ends the session's turn in flight, if any.
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	s := a.session(p.SessionId)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	cancel := s.cancelTurn
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}

// The demo supports nothing beyond the baseline: these answer "method not found".

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

func newSessionID() (acp.SessionId, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("demo agent: minting a session id: %w", err)
	}
	return acp.SessionId("demo-" + hex.EncodeToString(b[:])), nil
}
