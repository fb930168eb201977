package acpsubagent

import (
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"
	gojson "github.com/goccy/go-json"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// sdkUpdates are the session update kinds acp-go-sdk (v0.13.5) decodes.
//
// # Notes
//
// The SDK decodes a kind it does not know by the fields it has, so a kind
// newer than the SDK can pass for an older one: compaction_summary_chunk,
// which has content, decodes as agent_message_chunk and would put the
// compaction's summary in the step's output. Kinds outside this list are
// therefore never handed to the SDK's decoder (newerUpdate).
var sdkUpdates = map[string]bool{
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true,
	"available_commands_update": true, "current_mode_update": true, "config_option_update": true,
	"usage_update": true, "session_info_update": true,
}

// maxUpdateKind bounds the kind an agent names in an update acpflow
// records without knowing it.
const maxUpdateKind = 64

// newerUpdate takes a session/update of a kind the SDK does not decode —
// ACP's notice, compaction_update and compaction_summary_chunk, or any
// kind a newer agent sends — and records it as the agent sent it: a
// step_update event of its kind (the transcript holds every line anyway).
// It is never the step's output, and never fails the turn. False for the
// kinds the SDK decodes.
func (p *proc) newerUpdate(params json.RawMessage) bool {
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	var kind struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	if gojson.Unmarshal(params, &n) != nil || gojson.Unmarshal(n.Update, &kind) != nil || sdkUpdates[kind.SessionUpdate] {
		return false
	}
	c := p.client(acp.SessionId(n.SessionID))
	if c == nil {
		p.gate.handledOne()
		return true
	}
	defer p.gate.handledOne()
	if !c.ours(acp.SessionId(n.SessionID)) {
		return true
	}
	name := kind.SessionUpdate
	if name == "" {
		name = "unknown"
	}
	c.inv.Emit(acpagent.AgentUpdate{Kind: termtext.Cut(name, maxUpdateKind), Update: n.Update})
	return true
}
