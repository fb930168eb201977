package store

import (
	"encoding/json"
	"strings"
)

// A running step's output reaches the store as it is written: each chunk
// of agent text and each read of a shell's stdout is an event, and the
// event queue commits what came every 50 ms. An agent streams a token a
// chunk, hundreds a second; a row each would make the log, and every read
// of a step's output so far (the web UI's), grow with the tokens. So the
// queue joins, in each batch it writes, the chunks of one stream (a
// step's, or an element's, agent text or stdout) that follow each other
// with no other event of that step between: a streaming step costs the
// store at most one output row per 50 ms (20 a second), whatever its
// token rate, and the text and its order are unchanged.

// maxJoined bounds the text of one joined row.
const maxJoined = 64 << 10

// textChunk is what the queue knows of an event that is a chunk of output.
type textChunk struct {
	stream string // run, step, index and kind: the chunks that may be joined
	text   string
	index  *int
	kind   string
}

// chunkOf reads an output chunk's event (a step_update of kind
// agent_message_chunk or stdout with only its index and text besides);
// nil for any other event. It looks at the bytes before decoding, so that
// other events cost AppendEvent nothing more.
func chunkOf(runID, stepID, typ, fields string) *textChunk {
	if typ != "step_update" || (!strings.Contains(fields, `"kind":"agent_message_chunk"`) && !strings.Contains(fields, `"kind":"stdout"`)) {
		return nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal([]byte(fields), &f) != nil {
		return nil
	}
	c := &textChunk{}
	for k, v := range f {
		var err error
		switch k {
		case "kind":
			err = json.Unmarshal(v, &c.kind)
		case "text":
			err = json.Unmarshal(v, &c.text)
		case "index":
			err = json.Unmarshal(v, &c.index)
		default:
			return nil // a member it would not keep
		}
		if err != nil {
			return nil
		}
	}
	index := ""
	if c.index != nil {
		index = string(f["index"])
	}
	c.stream = strings.Join([]string{runID, stepID, index, c.kind}, "\x00")
	return c
}

// coalesce joins the batch's consecutive chunks of each stream (see
// above), in place, and returns the batch shortened. A chunk joins the
// last one of its stream unless another event of the same step came
// between (its turn_end, a tool call, its next attempt's step_start), or
// the row would exceed maxJoined.
func coalesce(batch []queuedEvent) []queuedEvent {
	out := batch[:0]
	open := map[string]int{} // stream → its last chunk's place in out, while it may be joined
	var joined map[int]*strings.Builder
	for _, e := range batch {
		if e.chunk == nil {
			step := e.runID + "\x00" + e.stepID + "\x00"
			for s := range open {
				if strings.HasPrefix(s, step) {
					delete(open, s)
				}
			}
			out = append(out, e)
			continue
		}
		i, ok := open[e.chunk.stream]
		if ok && len(out[i].chunk.text)+len(e.chunk.text) <= maxJoined {
			if joined == nil {
				joined = map[int]*strings.Builder{}
			}
			b := joined[i]
			if b == nil {
				b = &strings.Builder{}
				b.WriteString(out[i].chunk.text)
				joined[i] = b
			}
			b.WriteString(e.chunk.text)
			out[i].chunk = &textChunk{stream: e.chunk.stream, text: b.String(), index: e.chunk.index, kind: e.chunk.kind}
			continue
		}
		open[e.chunk.stream] = len(out)
		out = append(out, e)
	}
	for i := range joined {
		out[i].fields = chunkFields(out[i].chunk)
	}
	return out
}

// chunkFields encodes a joined chunk as its events are: index, kind,
// text, in name order.
func chunkFields(c *textChunk) string {
	b, _ := json.Marshal(struct {
		Index *int   `json:"index,omitempty"`
		Kind  string `json:"kind"`
		Text  string `json:"text"`
	}{c.index, c.kind, c.text})
	return string(b)
}
