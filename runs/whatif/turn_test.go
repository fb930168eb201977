package whatif_test

import (
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
)

// call is one tool call of a recorded turn and how acpflow answered it.
type call struct {
	id, kind, title string
	rawInput        any      // nil: none sent
	locations       []string // paths
	// answer is the option id sent, "" for cancelled, "-" for no answer
	// at all (the transcript ends first), "!" for an error answer.
	answer string
	// record is acpflow's record of the answer, when it kept one.
	record *policies.PermissionRecord
}

// demoOptions are the options the demo agent offers.
var demoOptions = []map[string]string{
	{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
	{"optionId": "allow-always", "name": "Allow always", "kind": "allow_always"},
	{"optionId": "reject-once", "name": "Reject once", "kind": "reject_once"},
	{"optionId": "reject-always", "name": "Reject always", "kind": "reject_always"},
}

// turn is the transcript of one attempt, shaped as acpflow records a
// demo-agent turn: initialize, session/new in cwd, the prompt, and for each
// call a tool_call update, the permission request and the answer, with a
// message chunk after each.
func turn(step, cwd string, calls []call) transcript.Step {
	t := transcript.Step{Step: step, Attempt: 1, Agent: "demo"}
	msg := func(dir string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		t.Messages = append(t.Messages, transcript.Message{Dir: dir, AtMS: int64(len(t.Messages)), Msg: b})
	}
	const sid = "demo-1"
	msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": 1, "clientInfo": map[string]any{"name": "acpflow", "version": "test"}}})
	msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"protocolVersion": 1}})
	msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": map[string]any{"cwd": cwd, "mcpServers": []any{}}})
	msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 2, "result": map[string]any{"sessionId": sid}})
	msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
		"params": map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "Do it."}}}})
	for i, c := range calls {
		tc := map[string]any{"toolCallId": c.id, "kind": c.kind, "title": c.title, "status": "pending"}
		if c.rawInput != nil {
			tc["rawInput"] = c.rawInput
		}
		if len(c.locations) > 0 {
			var locs []any
			for _, p := range c.locations {
				locs = append(locs, map[string]any{"path": p})
			}
			tc["locations"] = locs
		}
		update := map[string]any{"sessionUpdate": "tool_call"}
		for k, v := range tc {
			update[k] = v
		}
		msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "method": "session/update",
			"params": map[string]any{"sessionId": sid, "update": update}})
		id := i + 1
		msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/request_permission",
			"params": map[string]any{"sessionId": sid, "toolCall": tc, "options": demoOptions}})
		switch c.answer {
		case "-":
		case "!":
			msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": "internal"}})
		case "":
			msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}})
		default:
			msg(transcript.ToAgent, map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": c.answer}}})
		}
		msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "method": "session/update",
			"params": map[string]any{"sessionId": sid, "update": map[string]any{"sessionUpdate": "agent_message_chunk",
				"content": map[string]any{"type": "text", "text": fmt.Sprintf("permission %s %s: %s\n", c.kind, c.title, c.answer)}}}})
		if c.record != nil {
			t.Permissions = append(t.Permissions, *c.record)
		}
	}
	msg(transcript.FromAgent, map[string]any{"jsonrpc": "2.0", "id": 3, "result": map[string]any{"stopReason": "end_turn"}})
	return t
}

// record is acpflow's record of an answer.
func record(id string, d policies.Decision, optionID, rule string) *policies.PermissionRecord {
	outcome := policies.OutcomeSelected
	if optionID == "" {
		outcome = policies.OutcomeCancelled
	}
	return &policies.PermissionRecord{ToolCallID: id, Decision: d, Outcome: outcome, OptionID: optionID,
		Policy: policies.SourceWorkflow, Rule: rule}
}
