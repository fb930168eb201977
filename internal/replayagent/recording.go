package replayagent

import (
	"bytes"
	"encoding/json"

	"github.com/acpflow/acpflow/internal/transcript"
)

// wire is what replay reads of a JSON-RPC message; the message itself is
// sent on as it was recorded.
type wire struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func parseWire(msg []byte) (wire, bool) {
	var w wire
	if err := json.Unmarshal(msg, &w); err != nil {
		return wire{}, false
	}
	return w, true
}

func (w wire) hasID() bool       { return len(w.ID) > 0 && string(w.ID) != "null" }
func (w wire) isRequest() bool   { return w.Method != "" && w.hasID() }
func (w wire) isResponse() bool  { return w.Method == "" && w.hasID() }
func (w wire) isErrorful() bool  { return len(w.Error) > 0 && string(w.Error) != "null" }
func (w wire) idKey() string     { return idKey(w.ID) }
func (w wire) sessionID() string { return paramString(w.Params, "sessionId") }

// idKey is an id as a map key: 7 and 7.0 and "7" stay apart, spaces do not
// count.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// paramString reads a top-level string of params ("" when absent).
func paramString(params json.RawMessage, name string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return ""
	}
	var s string
	json.Unmarshal(m[name], &s)
	return s
}

// exchange is one request acpflow made in the recording, and what the
// agent did about it.
type exchange struct {
	method string
	// response is the agent's answer (nil: the recording has none).
	response json.RawMessage
	// during are the messages the agent sent on its own between the
	// request and its answer (a turn's updates and permission requests,
	// session/load's history); after, those it sent after its answer and
	// before acpflow's next request (claude's available_commands_update
	// after session/new).
	during, after []*agentMessage
}

// agentMessage is a notification or a request the agent sent, with the
// answer acpflow gave a request.
type agentMessage struct {
	msg     json.RawMessage
	method  string
	request bool
	// answer is acpflow's recorded answer to a request (nil: none, as when
	// the recording ends first).
	answer json.RawMessage
}

// recording is a step's transcript as replay plays it: per method, acpflow's
// requests in the order it sent them.
type recording struct {
	exchanges map[string][]*exchange
	truncated bool
}

// index reads a transcript into exchanges. A message the agent sent on its
// own belongs to the latest request still unanswered (during), or else to
// the one answered last (after); one before any request is dropped. A
// message that is not JSON-RPC (a line the agent wrote that was not JSON
// is kept as a string) is skipped.
func index(t *transcript.Step) *recording {
	r := &recording{exchanges: map[string][]*exchange{}, truncated: t.Truncated}
	var (
		open         []*exchange // unanswered, oldest first
		lastAnswered *exchange
		byClientID   = map[string]*exchange{}     // acpflow's requests awaiting an answer
		byAgentID    = map[string]*agentMessage{} // the agent's requests awaiting an answer
	)
	for _, m := range t.Messages {
		w, ok := parseWire(m.Msg)
		if !ok {
			continue
		}
		switch {
		case m.Dir == transcript.ToAgent && w.isRequest():
			ex := &exchange{method: w.Method}
			r.exchanges[w.Method] = append(r.exchanges[w.Method], ex)
			open = append(open, ex)
			byClientID[w.idKey()] = ex
		case m.Dir == transcript.FromAgent && w.isResponse():
			ex := byClientID[w.idKey()]
			if ex == nil {
				continue
			}
			delete(byClientID, w.idKey())
			ex.response = m.Msg
			for i, o := range open {
				if o == ex {
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
			lastAnswered = ex
		case m.Dir == transcript.FromAgent && w.Method != "":
			am := &agentMessage{msg: m.Msg, method: w.Method, request: w.hasID()}
			switch {
			case len(open) > 0:
				ex := open[len(open)-1]
				ex.during = append(ex.during, am)
			case lastAnswered != nil:
				lastAnswered.after = append(lastAnswered.after, am)
			default:
				continue
			}
			if am.request {
				byAgentID[w.idKey()] = am
			}
		case m.Dir == transcript.ToAgent && w.isResponse():
			if am := byAgentID[w.idKey()]; am != nil {
				am.answer = m.Msg
				delete(byAgentID, w.idKey())
			}
		}
	}
	return r
}
