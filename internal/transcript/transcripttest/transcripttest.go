// Package transcripttest writes transcript files for tests of the readers
// (replay, policy test): large ones, to prove that what a reader holds does
// not grow with the file.
package transcripttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/acpflow/acpflow/decisions"
	"github.com/acpflow/acpflow/internal/transcript"
)

// chunkBytes is the text of one padding message.
const chunkBytes = 64 << 10

// Large writes a transcript file in the format acpflow exports: attempts
// attempts of step "work" (1, 2, …), each a session in cwd with one
// execute permission request, allowed, then about stepBytes of agent
// message chunks. The records of every request are on the first attempt,
// as an export puts a step's records.
func Large(w io.Writer, cwd string, attempts, stepBytes int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, `{"format": %q, "run_id": "run-large", "workflow": "large", "steps": [`, transcript.Format)
	text := strings.Repeat("x", chunkBytes)
	for a := 1; a <= attempts; a++ {
		if a > 1 {
			bw.WriteString(",\n")
		}
		s := attempt(cwd, a, text, stepBytes/chunkBytes)
		if a == 1 {
			for i := 1; i <= attempts; i++ {
				s.Permissions = append(s.Permissions, decisions.Permission{
					ToolCallID: fmt.Sprintf("call_%d", i), Kind: "execute", Title: "make",
					Decision: decisions.Allow, Outcome: decisions.OutcomeSelected, OptionID: "allow",
					Policy: decisions.SourceWorkflow, Layer: decisions.LayerWorkflow, Rule: "1",
				})
			}
		}
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// attempt is attempt a of step work: its session, its request and answer,
// then chunks messages of text.
func attempt(cwd string, a int, text string, chunks int) transcript.Step {
	msg := func(dir string, v any) transcript.Message {
		b, _ := json.Marshal(v)
		return transcript.Message{Dir: dir, Msg: b}
	}
	session := fmt.Sprintf("sess-%d", a)
	call := fmt.Sprintf("call_%d", a)
	ms := []transcript.Message{
		msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": map[string]any{"cwd": cwd, "mcpServers": []any{}}}),
		msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"sessionId": session}}),
		msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": map[string]any{"sessionId": session, "prompt": []any{map[string]any{"type": "text", "text": "build"}}}}),
		msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": map[string]any{
			"sessionId": session,
			"toolCall":  map[string]any{"toolCallId": call, "kind": "execute", "title": "make", "rawInput": map[string]any{"command": "make"}},
			"options":   []any{map[string]any{"optionId": "allow", "name": "Allow", "kind": "allow_once"}, map[string]any{"optionId": "reject", "name": "Reject", "kind": "reject_once"}},
		}}),
		msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 0, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}}),
	}
	for range chunks {
		ms = append(ms, msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
			"sessionId": session, "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}},
		}}))
	}
	ms = append(ms, msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 2, "result": map[string]any{"stopReason": "end_turn"}}))
	return transcript.Step{Step: "work", Attempt: a, Agent: "claude", Messages: ms}
}
