package demoagent_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/demoagent"
)

// testClient is the client side of a test: it records what the demo agent streams and answers
// permission requests with answer.
type testClient struct {
	// answer decides a permission request; nil selects "allow-once".
	answer func(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)

	mu          sync.Mutex
	updates     []acp.SessionUpdate
	permissions []acp.RequestPermissionRequest
}

var _ acp.Client = (*testClient)(nil)

func (c *testClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n.Update)
	return nil
}

func (c *testClient) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permissions = append(c.permissions, req)
	c.mu.Unlock()
	if c.answer == nil {
		return selected("allow-once"), nil
	}
	return c.answer(ctx, req)
}

// chunks returns the texts of the agent_message_chunk updates, in order.
func (c *testClient) chunks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, u := range c.updates {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			out = append(out, u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return out
}

func (c *testClient) snapshot() ([]acp.SessionUpdate, []acp.RequestPermissionRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acp.SessionUpdate(nil), c.updates...), append([]acp.RequestPermissionRequest(nil), c.permissions...)
}

func (c *testClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (c *testClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (c *testClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *testClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *testClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *testClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *testClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

func selected(id string) acp.RequestPermissionResponse {
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))}
}

// demo is a demo agent served over real pipes, and the SDK client connected to it.
type demo struct {
	conn       *acp.ClientSideConnection
	closeStdin func() error // EOF on the agent's stdin
	served     <-chan error // Serve's result
}

func startDemo(t *testing.T, ctx context.Context, client *testClient) *demo {
	t.Helper()
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- demoagent.Serve(ctx, agentIn, agentOut) }()
	conn := acp.NewClientSideConnection(client, clientOut, clientIn)
	conn.SetLogger(discardLogger())
	t.Cleanup(func() {
		clientOut.Close()
		agentOut.Close()
		agentIn.Close()
		clientIn.Close()
	})
	return &demo{conn: conn, closeStdin: clientOut.Close, served: served}
}

func (d *demo) newSession(t *testing.T, cwd string) acp.SessionId {
	t.Helper()
	ctx := testContext(t)
	if _, err := d.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	resp, err := d.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

func (d *demo) prompt(t *testing.T, session acp.SessionId, text string) acp.StopReason {
	t.Helper()
	resp, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	return resp.StopReason
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestServeInitializeAnswersVersionOneAndItsName(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	resp, err := d.conn.Initialize(testContext(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if resp.ProtocolVersion != 1 {
		t.Errorf("protocol version = %d, want 1", resp.ProtocolVersion)
	}
	if resp.AgentInfo == nil || resp.AgentInfo.Name != demoagent.Name || resp.AgentInfo.Version == "" {
		t.Errorf("agentInfo = %+v, want name %q and a version", resp.AgentInfo, demoagent.Name)
	}
	if len(resp.AuthMethods) != 0 {
		t.Errorf("authMethods = %+v, want none", resp.AuthMethods)
	}
	if _, err := d.conn.Authenticate(testContext(t), acp.AuthenticateRequest{MethodId: "anything"}); err != nil {
		t.Errorf("authenticate: %v, want success", err)
	}
}

func TestServeSessionsGetFreshIDs(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	a, b := d.newSession(t, "/work"), d.newSession(t, "/work")
	if a == b || !strings.HasPrefix(string(a), "demo-") || !strings.HasPrefix(string(b), "demo-") {
		t.Errorf("session ids %q and %q: want two different demo-… ids", a, b)
	}
}

func TestServeStreamsTheAnswerInChunks(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")

	if stop := d.prompt(t, session, "Summarise the repository\nin two lines."); stop != acp.StopReasonEndTurn {
		t.Errorf("stop reason = %q, want end_turn", stop)
	}
	chunks := client.chunks()
	want := "demo agent received: Summarise the repository\ndemo agent: end of turn (0 tool requests).\n"
	if got := strings.Join(chunks, ""); got != want {
		t.Errorf("answer = %q, want %q", got, want)
	}
	if len(chunks) < 3 {
		t.Errorf("answer came in %d chunks, want at least 3: %q", len(chunks), chunks)
	}

	updates, _ := client.snapshot()
	var thoughts, plans int
	for _, u := range updates {
		switch {
		case u.AgentThoughtChunk != nil:
			thoughts++
		case u.Plan != nil:
			plans++
		}
	}
	if thoughts != 1 || plans != 1 {
		t.Errorf("got %d thoughts and %d plans, want one of each", thoughts, plans)
	}
}

func TestServeSamePromptGivesTheSameChunks(t *testing.T) {
	const prompt = "Check the build\ntool: execute make test\ntool: read go.mod"
	var runs [2][]string
	for i := range runs {
		client := &testClient{}
		d := startDemo(t, context.Background(), client)
		d.prompt(t, d.newSession(t, "/work"), prompt)
		runs[i] = client.chunks()
	}
	if strings.Join(runs[0], "|") != strings.Join(runs[1], "|") {
		t.Errorf("two runs of the same prompt differ:\n%q\n%q", runs[0], runs[1])
	}
}

func TestServeAsksPermissionForToolLines(t *testing.T) {
	tests := []struct {
		name       string
		answer     acp.RequestPermissionResponse
		wantLine   string
		wantStatus acp.ToolCallStatus
	}{
		{"an allowed call completes", selected("allow-once"), "permission execute rm -rf /tmp/x: allow-once", acp.ToolCallStatusCompleted},
		{"an always-allowed call completes", selected("allow-always"), "permission execute rm -rf /tmp/x: allow-always", acp.ToolCallStatusCompleted},
		{"a rejected call fails", selected("reject-once"), "permission execute rm -rf /tmp/x: reject-once", acp.ToolCallStatusFailed},
		{"an always-rejected call fails", selected("reject-always"), "permission execute rm -rf /tmp/x: reject-always", acp.ToolCallStatusFailed},
		{"a cancelled request is reported as cancelled", acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()},
			"permission execute rm -rf /tmp/x: cancelled", acp.ToolCallStatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &testClient{answer: func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				return tt.answer, nil
			}}
			d := startDemo(t, context.Background(), client)
			session := d.newSession(t, "/work")
			if stop := d.prompt(t, session, "Clean up\ntool: execute rm -rf /tmp/x\n"); stop != acp.StopReasonEndTurn {
				t.Errorf("stop reason = %q, want end_turn", stop)
			}

			answer := strings.Join(client.chunks(), "")
			if !strings.Contains(answer, "\n"+tt.wantLine+"\n") {
				t.Errorf("answer %q lacks the line %q", answer, tt.wantLine)
			}
			updates, permissions := client.snapshot()
			if len(permissions) != 1 {
				t.Fatalf("got %d permission requests, want 1", len(permissions))
			}
			req := permissions[0]
			checkOptions(t, req.Options)
			tc := req.ToolCall
			if tc.Kind == nil || *tc.Kind != acp.ToolKindExecute || tc.Title == nil || *tc.Title != "rm -rf /tmp/x" {
				t.Errorf("toolCall kind %v title %v, want execute and %q", tc.Kind, tc.Title, "rm -rf /tmp/x")
			}
			if raw, _ := tc.RawInput.(map[string]any); raw["command"] != "rm -rf /tmp/x" {
				t.Errorf("rawInput = %v, want command %q", tc.RawInput, "rm -rf /tmp/x")
			}
			if status := finalStatus(updates, tc.ToolCallId); status != tt.wantStatus {
				t.Errorf("tool call %s ended %q, want %q", tc.ToolCallId, status, tt.wantStatus)
			}
		})
	}
}

func TestServeToolCallsAnnounceTheirLocations(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work/repo")
	d.prompt(t, session, "Edit things\ntool: edit src/main.go add a flag\ntool: read /etc/hosts\ntool: search TODO")

	updates, permissions := client.snapshot()
	want := map[string]string{"edit": "/work/repo/src/main.go", "read": "/etc/hosts", "search": ""}
	if len(permissions) != len(want) {
		t.Fatalf("got %d permission requests, want %d", len(permissions), len(want))
	}
	for _, req := range permissions {
		kind := string(*req.ToolCall.Kind)
		var got string
		if len(req.ToolCall.Locations) > 0 {
			got = req.ToolCall.Locations[0].Path
		}
		if got != want[kind] {
			t.Errorf("%s: location %q, want %q", kind, got, want[kind])
		}
	}
	var started int
	for _, u := range updates {
		if u.ToolCall != nil {
			started++
			if u.ToolCall.Status != acp.ToolCallStatusPending {
				t.Errorf("tool_call %s starts %q, want pending", u.ToolCall.ToolCallId, u.ToolCall.Status)
			}
		}
	}
	if started != 3 {
		t.Errorf("got %d tool_call updates, want 3", started)
	}
	answer := strings.Join(client.chunks(), "")
	for _, line := range []string{
		"permission edit src/main.go add a flag: allow-once",
		"permission read /etc/hosts: allow-once",
		"permission search TODO: allow-once",
	} {
		if !strings.Contains(answer, line+"\n") {
			t.Errorf("answer %q lacks %q", answer, line)
		}
	}
}

func TestServeCancelMidTurnEndsItCancelled(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")
	// The client cancels while the agent waits for a permission answer, and never answers it:
	// the agent must abandon the request and end the turn.
	// The client holds its answer until the turn has ended: a turn that
	// ends at all was ended without the answer (an event, not a time); the
	// minute is a hang guard, after which the client gives up and says so.
	release := make(chan struct{})
	var gaveUp atomic.Bool
	client.answer = func(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		if err := d.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: req.SessionId}); err != nil {
			t.Errorf("session/cancel: %v", err)
		}
		select {
		case <-release:
		case <-time.After(time.Minute):
			gaveUp.Store(true)
		}
		return acp.RequestPermissionResponse{}, errors.New("abandoned")
	}

	stop := d.prompt(t, session, "Do it\ntool: execute sleep 100")
	close(release)
	if stop != acp.StopReasonCancelled {
		t.Errorf("stop reason = %q, want cancelled", stop)
	}
	if gaveUp.Load() {
		t.Error("the cancelled turn ended only once the client gave up its answer: the agent waited for it")
	}
	if chunks := client.chunks(); len(chunks) != 0 {
		t.Errorf("a cancelled turn streamed %q, want nothing", chunks)
	}

	// The session stays usable.
	client.answer = nil
	if stop := d.prompt(t, session, "Again"); stop != acp.StopReasonEndTurn {
		t.Errorf("next turn: stop reason = %q, want end_turn", stop)
	}
}

func TestServeRejectsAPromptForAnUnknownSession(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	d.newSession(t, "/work")
	_, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: "nope", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Errorf("prompt for an unknown session: %v, want an invalid-params error", err)
	}
}

func TestServeAnswersMethodNotFoundForWhatItDoesNotSupport(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	session := d.newSession(t, "/work")
	_, err := d.conn.SetSessionMode(testContext(t), acp.SetSessionModeRequest{SessionId: session, ModeId: "fast"})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32601 {
		t.Errorf("session/set_mode: %v, want method not found", err)
	}
}

func TestServeReturnsOnStdinEOF(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	d.newSession(t, "/work")
	d.closeStdin()
	select {
	case err := <-d.served:
		if err != nil {
			t.Errorf("Serve = %v, want nil on EOF", err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("Serve did not return after stdin EOF")
	}
}

func TestServeReturnsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := startDemo(t, ctx, &testClient{})
	cancel()
	select {
	case err := <-d.served:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("Serve did not return after its context ended")
	}
}

func checkOptions(t *testing.T, options []acp.PermissionOption) {
	t.Helper()
	want := map[acp.PermissionOptionKind]acp.PermissionOptionId{
		acp.PermissionOptionKindAllowOnce:    "allow-once",
		acp.PermissionOptionKindAllowAlways:  "allow-always",
		acp.PermissionOptionKindRejectOnce:   "reject-once",
		acp.PermissionOptionKindRejectAlways: "reject-always",
	}
	if len(options) != len(want) {
		t.Errorf("got %d options, want %d: %+v", len(options), len(want), options)
	}
	for _, o := range options {
		if want[o.Kind] != o.OptionId || o.Name == "" {
			t.Errorf("option %+v: want id %q and a name for kind %s", o, want[o.Kind], o.Kind)
		}
	}
}

// finalStatus is the status the last tool_call_update gave the call.
func finalStatus(updates []acp.SessionUpdate, id acp.ToolCallId) acp.ToolCallStatus {
	var status acp.ToolCallStatus
	for _, u := range updates {
		if u.ToolCallUpdate != nil && u.ToolCallUpdate.ToolCallId == id && u.ToolCallUpdate.Status != nil {
			status = *u.ToolCallUpdate.Status
		}
	}
	return status
}
