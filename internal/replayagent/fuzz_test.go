package replayagent

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
)

// FuzzPlay: whatever a transcript file holds, reading it, indexing a step
// for replay and playing it to a client that asks for a session and a
// prompt never panics.
func FuzzPlay(f *testing.F) {
	f.Add([]byte(`{"format": "acpflow-transcript/1", "steps": [{"step": "s", "attempt": 1, "messages": [
		{"dir": "to_agent", "msg": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/ws"}}},
		{"dir": "from_agent", "msg": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "x"}}},
		{"dir": "to_agent", "msg": {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "x"}}},
		{"dir": "from_agent", "msg": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "x", "update": {"sessionUpdate": "agent_message_chunk"}}}},
		{"dir": "from_agent", "msg": {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {}}},
		{"dir": "to_agent", "msg": {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "cancelled"}}}},
		{"dir": "from_agent", "msg": {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}}]}]}`))
	f.Add([]byte(`{"format": "acpflow-transcript/1", "steps": [{"step": "s", "messages": [{"dir": "from_agent", "msg": "text"}, {"dir": "to_agent", "msg": {"id": null}}]}]}`))
	client := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/ws"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"x"}}` + "\n"
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := transcript.Decode(bytes.NewReader(data), func(s *transcript.Step, _ int64) error {
			index(s)
			// The client's stream ends after its requests: Serve returns
			// then, whatever is in flight.
			Serve(context.Background(), s, strings.NewReader(client), io.Discard, io.Discard)
			return nil
		})
		_ = err
	})
}
