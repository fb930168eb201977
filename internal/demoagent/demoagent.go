// Package demoagent is acpflow's built-in deterministic ACP agent (docs/acp-subagent.md#the-demo-agent), served on stdio by
// `acpflow agent demo`. It needs no model, no network and no key: it answers a prompt by echoing
// it back in several chunks, and asks permission for every `tool: KIND TITLE` line of the prompt,
// which makes it the agent of the README's first run, of acpflow's end-to-end tests and of trying
// policies offline. A `json: TEXT` line makes TEXT its final message and a `usage: …` line makes
// it report usage (directives.go), for trying output-schema and budgets offline.
//
// It is an ordinary ACP agent built on the SDK's AgentSideConnection, so it also shows what a
// well-behaved agent sends: a thought and a plan (which a client must keep out of its output),
// tool calls with their updates, permission requests, and message chunks.
//
// A session remembers the first lines of its earlier prompts and says so in its answers, and it
// is saved to a file (state.go), so that acpflow's offline tests can prove that a later step
// continued an earlier step's session: with another session/prompt on the same process, or on a
// fresh process with session/load, session/resume or session/fork.
package demoagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
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
//   - Sessions are saved in the directory StateEnv names when Serve starts (or the default
//     one), at session/new and session/fork and after every completed turn. Nothing removes
//     them: delete the directory to forget them.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	a := &agent{serveCtx: ctx, store: sessionStoreFromEnv(), sessions: make(map[acp.SessionId]*session)}
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

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
	// session/fork is unstable: the SDK finds it by this method, not by an interface it names.
	_ interface {
		UnstableForkSession(context.Context, acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error)
	} = (*agent)(nil)
)

// agent implements acp.Agent. Its state is its live sessions and the store of saved ones;
// everything a turn says is derived from the prompt and the session's earlier prompts, so that
// the same conversation always gives the same answers.
type agent struct {
	serveCtx context.Context
	conn     *acp.AgentSideConnection
	store    sessionStore

	mu       sync.Mutex
	sessions map[acp.SessionId]*session // the live ones: created, loaded, resumed or forked, not closed
}

// session is what the agent remembers of one session.
type session struct {
	id acp.SessionId

	mu         sync.Mutex
	cwd        string             // a load or resume may move the session to another cwd
	history    []string           // echoes of the completed turns' prompts, oldest first
	calls      int                // tool calls made so far in the session, for unique ids
	cost       float64            // what usage: lines cost on this process, for usage_update
	cancelTurn context.CancelFunc // the turn in flight, if any
}

func newSessionFrom(s savedSession, cwd string) *session {
	return &session{id: s.SessionID, cwd: cwd, history: s.Echoes, calls: s.ToolCalls}
}

// addCost adds a turn's cost to the session's and returns the sum, which a usage_update
// reports as an adapter does: cumulative over the session's turns on this process (a fresh
// process that loads the session starts again from 0, as a real adapter's would).
func (s *session) addCost(turn float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cost += turn
	return s.cost
}

func (s *session) nextToolCallID() acp.ToolCallId {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return acp.ToolCallId(fmt.Sprintf("call_%d", s.calls))
}

// saved is the session as its file holds it.
func (s *session) saved() savedSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.savedLocked()
}

func (s *session) savedLocked() savedSession {
	return savedSession{SessionID: s.id, Cwd: s.cwd, Echoes: slices.Clone(s.history), ToolCalls: s.calls}
}

// remember adds a completed turn's echo to the history and saves the session. The history
// changes only once the file is written, so that this process and a fresh one agree. The save
// happens under the session's lock, so that an older save never overwrites a newer one.
func (s *session) remember(store sessionStore, echo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.savedLocked()
	next.Echoes = append(next.Echoes, echo)
	if err := store.save(next); err != nil {
		return err
	}
	s.history = next.Echoes
	return nil
}

func (a *agent) session(id acp.SessionId) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

// Initialize answers protocol version 1, the demo's name with acpflow's version, no auth
// methods, and the ways to continue a session: load, resume, fork and close.
func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: Name, Version: version.Version},
		AuthMethods:     []acp.AuthMethod{},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: true,
			SessionCapabilities: acp.SessionCapabilities{
				Close:  &acp.SessionCloseCapabilities{},
				Resume: &acp.SessionResumeCapabilities{},
				Fork:   &acp.SessionForkCapabilities{},
			},
		},
	}, nil
}

// Authenticate succeeds whatever the method: the demo has nothing to log in to.
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// Logout implements acp.Agent: the demo agent has no login to end.
func (a *agent) Logout(context.Context, acp.LogoutRequest) (acp.LogoutResponse, error) {
	return acp.LogoutResponse{}, nil
}

// NewSession remembers the session's cwd, against which relative paths of tool lines resolve,
// and saves the session at once, so that a fresh process can continue it even when its first
// turn did not complete.
func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if err := checkCwd(p.Cwd); err != nil {
		return acp.NewSessionResponse{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	s := &session{id: id, cwd: filepath.Clean(p.Cwd)}
	if err := a.store.save(s.saved()); err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: id}, nil
}

// LoadSession makes a saved (or live) session live with the request's cwd, and replays its
// history before answering, as ACP requires of session/load: per completed turn, the prompt's
// first line as a user_message_chunk and "demo agent received: <it>" as an agent_message_chunk.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	s, err := a.continueSession(p.SessionId, p.Cwd)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.mu.Lock()
	history := slices.Clone(s.history)
	s.mu.Unlock()
	for _, echo := range history {
		for _, u := range []acp.SessionUpdate{
			acp.UpdateUserMessageText(echo),
			acp.UpdateAgentMessageText("demo agent received: " + echo + "\n"),
		} {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: u}); err != nil {
				return acp.LoadSessionResponse{}, fmt.Errorf("demo agent: replaying session %s: %w", s.id, err)
			}
		}
	}
	return acp.LoadSessionResponse{}, nil
}

// ResumeSession makes a saved (or live) session live with the request's cwd, without the
// replay of session/load.
func (a *agent) ResumeSession(_ context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	if _, err := a.continueSession(p.SessionId, p.Cwd); err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	return acp.ResumeSessionResponse{}, nil
}

// continueSession is the live session id, moved to cwd, or else the saved one, made live.
func (a *agent) continueSession(id acp.SessionId, cwd string) (*session, error) {
	if err := checkCwd(cwd); err != nil {
		return nil, err
	}
	cwd = filepath.Clean(cwd)
	if s := a.session(id); s != nil {
		s.mu.Lock()
		s.cwd = cwd
		s.mu.Unlock()
		return s, nil
	}
	saved, err := a.loadSaved(id)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[id]; s != nil { // a concurrent load or resume made it live first
		return s, nil
	}
	s := newSessionFrom(saved, cwd)
	a.sessions[id] = s
	return s, nil
}

// UnstableForkSession starts a new session with a copy of the source's history (the live
// session's, or else the saved one's) in the request's cwd. Later turns of either session do
// not change the other.
func (a *agent) UnstableForkSession(_ context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	if err := checkCwd(p.Cwd); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	var source savedSession
	if s := a.session(p.SessionId); s != nil {
		source = s.saved()
	} else {
		saved, err := a.loadSaved(p.SessionId)
		if err != nil {
			return acp.UnstableForkSessionResponse{}, err
		}
		source = saved
	}
	id, err := newSessionID()
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	source.SessionID = id
	fork := newSessionFrom(source, filepath.Clean(p.Cwd))
	if err := a.store.save(fork.saved()); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[id] = fork
	a.mu.Unlock()
	return acp.UnstableForkSessionResponse{SessionId: id}, nil
}

// loadSaved reads a saved session, answering invalid params for an id that is not the demo's or
// that has no file.
func (a *agent) loadSaved(id acp.SessionId) (savedSession, error) {
	if !validSessionID(id) {
		return savedSession{}, acp.NewInvalidParams(map[string]any{
			"sessionId": id, "error": "not a session id of the demo agent (demo- and hex digits)",
		})
	}
	saved, err := a.store.load(id)
	if errors.Is(err, errNoSavedSession) {
		return savedSession{}, acp.NewInvalidParams(map[string]any{
			"sessionId": id, "error": fmt.Sprintf("unknown session %s: not live and not saved in %s", id, a.store.dir),
		})
	}
	return saved, err
}

// CloseSession cancels the session's turn in flight and forgets the live session. Its file
// stays, so that a fresh process can still continue it.
func (a *agent) CloseSession(_ context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	delete(a.sessions, p.SessionId)
	a.mu.Unlock()
	if s == nil {
		return acp.CloseSessionResponse{}, acp.NewInvalidParams(map[string]any{
			"sessionId": p.SessionId, "error": fmt.Sprintf("unknown session %s: not live", p.SessionId),
		})
	}
	s.cancel()
	return acp.CloseSessionResponse{}, nil
}

// Prompt runs one turn (see turn.go) and, once it completed, remembers its prompt's first line.
// A session/cancel, a session/close, or the end of Serve's ctx, ends it with stop reason
// cancelled, and a cancelled turn is not remembered.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s := a.session(p.SessionId)
	if s == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{
			"sessionId": p.SessionId, "error": "unknown session: call session/new, session/load or session/resume first",
		})
	}

	// The SDK already cancels ctx on session/cancel; the turn's own cancel also covers the end
	// of Serve, session/close, and a Cancel that an SDK version might deliver without
	// cancelling ctx.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.serveCtx, cancel)()
	s.mu.Lock()
	s.cancelTurn = cancel
	t := &turn{conn: a.conn, session: s, cwd: s.cwd, history: slices.Clone(s.history)}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancelTurn = nil
		s.mu.Unlock()
	}()

	text := promptText(p.Prompt)
	t.echo, t.tools = ParsePrompt(text)
	directives, err := ParseDirectives(text)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	t.directives = directives
	if err := t.run(ctx); err != nil {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	if ctx.Err() != nil {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if err := s.remember(a.store, t.echo); err != nil {
		return acp.PromptResponse{}, err
	}
	resp := acp.PromptResponse{StopReason: acp.StopReasonEndTurn}
	if u := directives.Usage; u != nil {
		resp.Usage = u.promptUsage()
	}
	return resp, nil
}

// Cancel ends the session's turn in flight, if any.
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	if s := a.session(p.SessionId); s != nil {
		s.cancel()
	}
	return nil
}

// cancel ends the session's turn in flight, if any.
func (s *session) cancel() {
	s.mu.Lock()
	cancel := s.cancelTurn
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// The demo supports nothing more: these answer "method not found".

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// checkCwd refuses a relative cwd, as every request that makes a session live must: tool lines'
// relative paths resolve against it.
func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return acp.NewInvalidParams(map[string]any{
			"cwd": cwd, "error": "cwd must be an absolute path",
		})
	}
	return nil
}

func newSessionID() (acp.SessionId, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("demo agent: minting a session id: %w", err)
	}
	return acp.SessionId("demo-" + hex.EncodeToString(b[:])), nil
}
