package replayagent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/transcript"
)

// The recorded step of these tests: a session, then a turn with two updates and one permission
// request between them. Key order, _meta and a field no SDK knows are as an agent might send
// them: replay must pass them on as they are.
var (
	initReq  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false}}}}`
	initResp = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[],"agentInfo":{"name":"recorded","version":"9.9"}}}`
	newReq   = `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/recorded","mcpServers":[]}}`
	newResp  = `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"rec-1","modes":{"currentModeId":"ask","availableModes":[{"id":"ask","name":"Ask"}]}}}`
	commands = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-1","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`
	// The turn.
	promptReq  = `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"rec-1","prompt":[{"type":"text","text":"write the notes"}]}}`
	toolCall   = `{"method":"session/update","jsonrpc":"2.0","params":{"sessionId":"rec-1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"Write notes.txt","kind":"edit","status":"pending","futureField":true}}}`
	permReq    = `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"rec-1","toolCall":{"toolCallId":"call_1","title":"Write notes.txt","kind":"edit"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`
	permResp   = `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`
	message    = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Wrote notes.txt. <done> & \u00e9"}},"_meta":{"seq":2}}}`
	promptResp = `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","_meta":{"usage":{"totalTokens":42}}}}`
)

// recordedTurn is the recording: acpflow's messages and the agent's, in the order they went.
// hangGuard is how long a test waits for what should come at once: a
// guard against a hang, not a measurement, so long enough that a machine
// at load 20 (which delays a goroutine by seconds) never trips it.
const hangGuard = time.Minute

func recordedTurn() []transcript.Message {
	return messages(
		to(initReq), from(initResp), to(newReq), from(newResp), from(commands),
		to(promptReq), from(toolCall), from(permReq), to(permResp), from(message), from(promptResp),
	)
}

type dirMsg struct{ dir, msg string }

func to(m string) dirMsg   { return dirMsg{transcript.ToAgent, m} }
func from(m string) dirMsg { return dirMsg{transcript.FromAgent, m} }

func messages(ms ...dirMsg) []transcript.Message {
	out := make([]transcript.Message, len(ms))
	for i, m := range ms {
		out[i] = transcript.Message{Dir: m.dir, AtMS: int64(i * 100), Msg: json.RawMessage(m.msg)}
	}
	return out
}

// recorded writes the messages as step "write" of a transcript file, as acpflow export would
// (indented), and reads it back as `acpflow agent replay FILE write` does.
func recorded(t *testing.T, truncated bool, msgs []transcript.Message) *transcript.Step {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.transcript.json")
	f := &transcript.File{RunID: "run-1", Workflow: "notes", Steps: []transcript.Step{
		{Step: "write", Attempt: 1, Agent: "claude", Truncated: truncated, Messages: msgs},
	}}
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(fh); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	s, err := replayagent.Load(path, "write")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// client is the test's side of a replay served over real pipes: it writes lines and reads
// them one at a time.
type client struct {
	t      *testing.T
	w      *os.File
	lines  chan string
	served chan error
	diag   *syncBuffer
}

func serve(t *testing.T, rec *transcript.Step) *client {
	t.Helper()
	agentIn, clientOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	clientIn, agentOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, w: clientOut, lines: make(chan string, 64), served: make(chan error, 1), diag: &syncBuffer{}}
	go func() {
		c.served <- replayagent.Serve(context.Background(), rec, agentIn, agentOut, c.diag)
		agentOut.Close()
	}()
	go func() {
		sc := bufio.NewScanner(clientIn)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		clientOut.Close()
		select {
		case err := <-c.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(hangGuard):
			t.Error("Serve did not return on EOF")
		}
		agentIn.Close()
		clientIn.Close()
	})
	return c
}

func (c *client) send(msg string) {
	c.t.Helper()
	if _, err := c.w.WriteString(msg + "\n"); err != nil {
		c.t.Fatal(err)
	}
}

// recv is the next line the agent wrote.
func (c *client) recv() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the agent's output ended")
		}
		return l
	case <-time.After(hangGuard):
		c.t.Fatalf("the agent wrote nothing for %s", hangGuard)
	}
	return ""
}

// quiet proves the agent writes nothing more for a while.
func (c *client) quiet() {
	c.t.Helper()
	select {
	case l := <-c.lines:
		c.t.Errorf("the agent wrote more: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
}

// expect reads the next line and wants it to be want, byte for byte.
func (c *client) expect(want string) {
	c.t.Helper()
	if got := c.recv(); got != want {
		c.t.Errorf("the agent wrote\n\t%s\nwant\n\t%s", got, want)
	}
}

// start opens the session as acpflow does, with ids of its own (not the recording's).
func (c *client) start() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":100,"method":"initialize","params":{"protocolVersion":1}}`)
	c.expect(strings.Replace(initResp, `"id":0`, `"id":100`, 1))
	c.send(`{"jsonrpc":"2.0","id":101,"method":"session/new","params":{"cwd":"/elsewhere","mcpServers":[]}}`)
	c.expect(strings.Replace(newResp, `"id":1`, `"id":101`, 1))
	c.expect(commands)
}

// permissionRequest reads the agent's permission request, which must be the recorded one
// under a new id, and returns that id.
func (c *client) permissionRequest() json.RawMessage {
	c.t.Helper()
	got := c.recv()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(got), &m); err != nil || len(m.ID) == 0 {
		c.t.Fatalf("want the permission request, got %s", got)
	}
	if want := strings.Replace(permReq, `"id":7`, `"id":`+string(m.ID), 1); got != want {
		c.t.Errorf("the permission request is\n\t%s\nwant\n\t%s", got, want)
	}
	return m.ID
}

func (c *client) answerPermission(id json.RawMessage, outcome string) {
	c.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"outcome":` + outcome + `}}`)
}

func TestATurnAnsweredAsRecordedReplaysTheRecordedMessages(t *testing.T) {
	c := serve(t, recorded(t, false, recordedTurn()))
	c.start()
	c.send(`{"jsonrpc":"2.0","id":102,"method":"session/prompt","params":{"sessionId":"rec-1","prompt":[{"type":"text","text":"anything"}]}}`)
	c.expect(toolCall)
	id := c.permissionRequest()
	c.answerPermission(id, `{"outcome":"selected","optionId":"allow"}`)
	c.expect(message)
	c.expect(strings.Replace(promptResp, `"id":2`, `"id":102`, 1))
	c.quiet()
	if d := c.diag.String(); d != "" {
		t.Errorf("stderr: %q", d)
	}
}

func TestAPermissionAnsweredOtherwiseEndsTheTurnWithRefusal(t *testing.T) {
	for _, tc := range []struct {
		name, outcome, said string
	}{
		{"another option selected", `{"outcome":"selected","optionId":"reject"}`, "reject"},
		{"the request cancelled", `{"outcome":"cancelled"}`, "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, recorded(t, false, recordedTurn()))
			c.start()
			c.send(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"rec-1","prompt":[]}}`)
			c.expect(toolCall)
			c.answerPermission(c.permissionRequest(), tc.outcome)

			line := `replay: permission for "Write notes.txt" was answered ` + tc.said + `, the recording has allow: the recording ends here`
			chunk, _ := json.Marshal(line)
			// The refused tool call reported failed, then the explanation as a message of its own.
			c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-1","update":{"sessionUpdate":"tool_call_update","status":"failed","toolCallId":"call_1"}}}`)
			c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + string(chunk) + `}}}}`)
			c.expect(`{"id":"p","jsonrpc":"2.0","result":{"stopReason":"refusal"}}`)
			c.quiet()
			if got := c.diag.String(); got != line+"\n" {
				t.Errorf("stderr is %q, want %q", got, line+"\n")
			}
		})
	}
}

func TestSessionCancelEndsTheTurnCancelled(t *testing.T) {
	c := serve(t, recorded(t, false, recordedTurn()))
	c.start()
	c.send(`{"jsonrpc":"2.0","id":102,"method":"session/prompt","params":{"sessionId":"rec-1","prompt":[]}}`)
	c.expect(toolCall)
	c.permissionRequest()
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"rec-1"}}`)
	c.expect(`{"id":102,"jsonrpc":"2.0","result":{"stopReason":"cancelled"}}`)
	c.quiet()
}

func TestRequestsTheRecordingLacks(t *testing.T) {
	c := serve(t, recorded(t, false, recordedTurn()))
	c.start()
	for _, tc := range []struct{ name, req, want string }{
		{"a method never recorded is an error",
			`{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"rec-1","cwd":"/w","mcpServers":[]}}`,
			`{"error":{"code":-32601,"message":"the recording has no session/load"},"id":5,"jsonrpc":"2.0"}`},
		{"one more of a method than recorded is an error",
			`{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
			`{"error":{"code":-32601,"message":"the recording has only 1 session/new (this is number 2)"},"id":6,"jsonrpc":"2.0"}`},
		{"a mode the recording never set is set",
			`{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"rec-1","modeId":"ask"}}`,
			`{"id":7,"jsonrpc":"2.0","result":{}}`},
		{"a config option the recording never set is set",
			`{"jsonrpc":"2.0","id":8,"method":"session/set_config_option","params":{"sessionId":"rec-1","configId":"model","value":"x"}}`,
			`{"id":8,"jsonrpc":"2.0","result":{}}`},
		{"a session the recording never closed is closed",
			`{"jsonrpc":"2.0","id":9,"method":"session/close","params":{"sessionId":"rec-1"}}`,
			`{"id":9,"jsonrpc":"2.0","result":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			c.send(tc.req)
			c.expect(tc.want)
		})
	}
}

func TestATruncatedRecordingPlaysWhatItHasThenFailsTheTurn(t *testing.T) {
	msgs := recordedTurn()
	msgs = msgs[:len(msgs)-2] // the recording stopped after the permission's answer
	c := serve(t, recorded(t, true, msgs))
	c.start()
	c.send(`{"jsonrpc":"2.0","id":102,"method":"session/prompt","params":{"sessionId":"rec-1","prompt":[]}}`)
	c.expect(toolCall)
	c.answerPermission(c.permissionRequest(), `{"outcome":"selected","optionId":"allow"}`)
	c.expect(`{"error":{"code":-32603,"message":"the recording was truncated before the turn ended"},"id":102,"jsonrpc":"2.0"}`)
}

func TestServeReturnsAtEOFWithATurnInFlight(t *testing.T) {
	agentIn, clientOut, _ := os.Pipe()
	defer agentIn.Close()
	var out syncBuffer
	served := make(chan error, 1)
	go func() {
		served <- replayagent.Serve(context.Background(), recorded(t, false, recordedTurn()), agentIn, &out, &out)
	}()
	clientOut.WriteString(initReq + "\n" + newReq + "\n" + promptReq + "\n")
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(out.String(), "session/request_permission") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	clientOut.Close() // the permission is never answered
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return at EOF")
	}
}

func TestServeReturnsWhenItsContextEnds(t *testing.T) {
	agentIn, clientOut, _ := os.Pipe()
	defer agentIn.Close()
	defer clientOut.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- replayagent.Serve(ctx, recorded(t, false, recordedTurn()), agentIn, &syncBuffer{}, &syncBuffer{})
	}()
	cancel()
	select {
	case err := <-served:
		if err != context.Canceled {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return when its context ended")
	}
}

// syncBuffer is a bytes.Buffer that a test reads while Serve writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
