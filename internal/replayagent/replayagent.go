// Package replayagent is `builtin: replay` (docs/transcripts.md#replay): an ACP agent, served
// on stdio by `acpflow agent replay FILE STEP`, that plays back one step's recorded transcript.
// acpflow drives it as it drives a real agent, so a workflow re-runs offline and
// deterministically, its policies and expressions re-evaluated against exactly what the real
// agent said.
//
// It answers each request with the recorded answer to the recorded request of the same method
// and rank (the second session/new gets the second recorded session/new's answer), and a turn
// with the agent's recorded updates and permission requests, then the recorded stop reason. A
// permission answered differently from the recording ends the turn with stop reason refusal:
// a real agent whose tool call was refused could not have gone on as recorded.
//
// # Notes
//
// It is a loop over raw JSON-RPC lines, not the SDK's AgentSideConnection as the demo agent is:
// a replay must send what the agent sent, byte for byte (fields this SDK version does not
// know, _meta, the order of keys), and the SDK would decode every message into its types and
// encode it again. Only the id of a request the agent makes is new (the client's ids in the
// recording are not this client's), and the id of an answer is the request's.
package replayagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/acpflow/acpflow/internal/transcript"
)

// JSON-RPC error codes replay answers with.
const (
	codeMethodNotFound = -32601
	codeInternal       = -32603
)

// answeredEmpty are the methods a recording without them answers with {}: a step of the
// recording may have set no mode or config option, which the replaying workflow may set.
var answeredEmpty = map[string]bool{
	"session/set_mode":          true,
	"session/set_config_option": true,
	"session/close":             true,
}

// Serve plays rec back over one ACP connection: it reads the client's JSON-RPC messages from
// in (one per line) and writes the recorded ones to out. A divergence (a permission answered
// differently from the recording) is also written to diag, one line. Serve returns nil when in
// reaches EOF, at once, whatever is in flight; or ctx.Err() when ctx ends first.
//
// # Notes
//
//   - Serve neither closes in nor out. When ctx ends first, its reader stays blocked on in
//     until the caller closes it (or the process exits).
//   - Time offsets (at_ms) are ignored: the recording is played as fast as the client reads.
//   - The recorded session ids are used as they are: session/new's recorded answer gives the
//     id the client uses from then on.
//   - A request the agent made other than session/request_permission (fs/*, terminal/*) is
//     sent and its answer awaited, but the answer is not compared: it depends on the machine
//     the replay runs on, not on a decision.
func Serve(ctx context.Context, rec *transcript.Step, in io.Reader, out, diag io.Writer) error {
	p := &player{
		rec: index(rec), out: out, diag: diag, done: make(chan struct{}),
		ranks: map[string]int{}, waiting: map[string]chan wire{}, turns: map[*turn]struct{}{},
	}
	read := make(chan error, 1)
	go func() {
		read <- p.read(in)
		close(p.done)
	}()
	select {
	case err := <-read:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// player is one connection's replay.
type player struct {
	rec  *recording
	diag io.Writer
	// done is closed when the client's stream ended: nothing in flight
	// waits any longer.
	done chan struct{}
	// ranks counts the client's requests per method; only the reader
	// touches it, so that the ranks follow the order of the requests.
	ranks map[string]int

	outMu sync.Mutex
	out   io.Writer

	mu      sync.Mutex
	nextID  int64
	waiting map[string]chan wire // the agent's requests awaiting the client's answer, by id
	turns   map[*turn]struct{}   // the turns being played, for session/cancel
}

// turn is a session/prompt being played.
type turn struct {
	session string
	cancel  context.CancelFunc
}

// read dispatches the client's messages until in ends. A request is answered on a goroutine
// of its own, since playing it may wait for the client's answers, which come through here.
func (p *player) read(in io.Reader) error {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			p.dispatch(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (p *player) dispatch(line []byte) {
	w, ok := parseWire(line)
	if !ok {
		return // not JSON-RPC: nothing in the recording answers it
	}
	switch {
	case w.isRequest():
		rank := p.ranks[w.Method]
		p.ranks[w.Method]++
		var ex *exchange
		if list := p.rec.exchanges[w.Method]; rank < len(list) {
			ex = list[rank]
		}
		go p.answer(w, rank, ex)
	case w.isResponse():
		p.mu.Lock()
		ch := p.waiting[w.idKey()]
		delete(p.waiting, w.idKey())
		p.mu.Unlock()
		if ch != nil {
			ch <- w
		}
	case w.Method == "session/cancel":
		p.cancelTurns(w.sessionID())
	}
}

// answer plays the recorded exchange ex for the client's request req, the rank-th of its method
// (ex nil: the recording has no such request).
func (p *player) answer(req wire, rank int, ex *exchange) {
	if ex == nil {
		switch have := len(p.rec.exchanges[req.Method]); {
		case answeredEmpty[req.Method]:
			p.respond(req.ID, json.RawMessage(`{}`))
		case have == 0:
			p.fail(req.ID, codeMethodNotFound, "the recording has no "+req.Method)
		default:
			p.fail(req.ID, codeMethodNotFound, fmt.Sprintf("the recording has only %d %s (this is number %d)", have, req.Method, rank+1))
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if req.Method == "session/prompt" {
		t := &turn{session: req.sessionID(), cancel: cancel}
		p.mu.Lock()
		p.turns[t] = struct{}{}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.turns, t)
			p.mu.Unlock()
		}()
	}

	divergence, refused := p.play(ctx, ex.during)
	switch {
	case p.ended():
		return
	case ctx.Err() != nil:
		p.respond(req.ID, json.RawMessage(`{"stopReason":"cancelled"}`))
		return
	case divergence != "" && req.Method == "session/prompt":
		// The client's answer took the turn where the recording does not go: end it as a real
		// agent whose tool call was refused would, saying why where the step's output and
		// the agent's stderr (which acpflow puts in the step's error) both show it. The
		// refused tool call is reported failed first, as such an agent reports it, which also
		// makes the explanation a message of its own (the turn's final), not the tail of a
		// message the recording was streaming when it asked.
		fmt.Fprintln(p.diag, divergence)
		if refused != "" {
			p.send(toolCallFailed(req.sessionID(), refused))
		}
		p.send(messageChunk(req.sessionID(), divergence))
		settle(p.diag)
		p.respond(req.ID, json.RawMessage(`{"stopReason":"refusal"}`))
		return
	case divergence != "":
		fmt.Fprintln(p.diag, divergence)
		p.fail(req.ID, codeInternal, divergence)
		return
	case ex.response == nil:
		p.fail(req.ID, codeInternal, unanswered(req.Method, p.rec.truncated))
		return
	}
	p.send(withID(ex.response, req.ID))
	p.play(ctx, ex.after)
}

// unanswered says why a recorded request has no recorded answer.
func unanswered(method string, truncated bool) string {
	what := method + " was answered"
	if method == "session/prompt" {
		what = "the turn ended"
	}
	if truncated {
		return "the recording was truncated before " + what
	}
	return "the recording ends before " + what
}

// play sends msgs, the agent's own messages, in order: a request with a fresh id, waiting for
// the client's answer. It returns the divergence when a permission was answered otherwise than
// recorded (and stops there), with the tool call id of that request; "" when all were played or
// ctx ended.
func (p *player) play(ctx context.Context, msgs []*agentMessage) (divergence, toolCallID string) {
	for _, m := range msgs {
		if ctx.Err() != nil || p.ended() {
			return "", ""
		}
		if !m.request {
			p.send(m.msg)
			continue
		}
		id, answer := p.await()
		p.send(withID(m.msg, id))
		var got wire
		select {
		case got = <-answer:
		case <-ctx.Done():
			p.forget(id)
			return "", ""
		case <-p.done:
			return "", ""
		}
		if m.method != "session/request_permission" || m.answer == nil {
			continue
		}
		want, _ := parseWire(m.answer)
		if g, w := outcome(got), outcome(want); g != w {
			title, id := toolCall(m.msg)
			if title == "" {
				title = id
			}
			return Divergence(title, g, w), id
		}
	}
	return "", ""
}

// Divergence is what replay says, on stderr and as the turn's last message, when the client
// answered permission for the tool call titled title with got where the recording has want
// (an option id, "cancelled", or "an error").
func Divergence(title, got, want string) string {
	return fmt.Sprintf("replay: permission for %q was answered %s, the recording has %s: the recording ends here", title, got, want)
}

// outcome is how a permission request was answered: the option id selected, "cancelled", or
// "an error".
func outcome(w wire) string {
	if w.isErrorful() {
		return "an error"
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	json.Unmarshal(w.Result, &r)
	switch r.Outcome.Outcome {
	case "selected":
		return r.Outcome.OptionID
	case "cancelled":
		return "cancelled"
	}
	return "an unknown outcome " + strconv.Quote(string(w.Result))
}

// toolCall is the title and id of the tool call a permission request asks about.
func toolCall(msg json.RawMessage) (title, id string) {
	var m struct {
		Params struct {
			ToolCall struct {
				Title      string `json:"title"`
				ToolCallID string `json:"toolCallId"`
			} `json:"toolCall"`
		} `json:"params"`
	}
	json.Unmarshal(msg, &m)
	return m.Params.ToolCall.Title, m.Params.ToolCall.ToolCallID
}

// toolCallFailed is a session/update that reports tool call id failed.
func toolCallFailed(session, id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "session/update",
		"params": map[string]any{
			"sessionId": session,
			"update":    map[string]string{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"},
		},
	})
	return b
}

// messageChunk is a session/update that says text as an agent_message_chunk.
func messageChunk(session, text string) json.RawMessage {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type update struct {
		SessionUpdate string  `json:"sessionUpdate"`
		Content       content `json:"content"`
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "session/update",
		"params": map[string]any{
			"sessionId": session,
			"update":    update{SessionUpdate: "agent_message_chunk", Content: content{Type: "text", Text: text}},
		},
	})
	return b
}

// await takes a fresh id for a request of the agent's, and the channel its answer comes on.
func (p *player) await() (json.RawMessage, chan wire) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	id := json.RawMessage(strconv.FormatInt(p.nextID, 10))
	ch := make(chan wire, 1)
	p.waiting[idKey(id)] = ch
	return id, ch
}

func (p *player) forget(id json.RawMessage) {
	p.mu.Lock()
	delete(p.waiting, idKey(id))
	p.mu.Unlock()
}

// cancelTurns ends the turns of session (of every session when it is "").
func (p *player) cancelTurns(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.turns {
		if session == "" || t.session == session {
			t.cancel()
		}
	}
}

func (p *player) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// respond answers request id with result.
func (p *player) respond(id json.RawMessage, result json.RawMessage) {
	p.send(jsonRPC(map[string]json.RawMessage{"id": id, "result": result}))
}

// fail answers request id with an error.
func (p *player) fail(id json.RawMessage, code int, message string) {
	e, _ := json.Marshal(map[string]any{"code": code, "message": message})
	p.send(jsonRPC(map[string]json.RawMessage{"id": id, "error": e}))
}

func jsonRPC(fields map[string]json.RawMessage) json.RawMessage {
	fields["jsonrpc"] = json.RawMessage(`"2.0"`)
	b, _ := json.Marshal(fields)
	return b
}

// send writes one message, compacted to one line (a transcript file is indented, its messages
// too). A write error is not reported: the client is gone, and the end of in ends Serve.
func (p *player) send(msg json.RawMessage) {
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		return // not JSON: index and withID only pass on what parsed
	}
	b.WriteByte('\n')
	p.outMu.Lock()
	defer p.outMu.Unlock()
	p.out.Write(b.Bytes())
}

// withID is msg, a JSON object, with its id replaced by id; everything else, the order of the
// keys included, stays as it was.
func withID(msg, id json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return msg
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for first := true; dec.More(); first = false {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return msg
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return msg
		}
		if !first {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		if key == "id" {
			v = id
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
