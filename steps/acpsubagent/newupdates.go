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
// therefore never handed to the SDK's decoder (ownUpdate).
var sdkUpdates = map[string]bool{
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true,
	"available_commands_update": true, "current_mode_update": true, "config_option_update": true,
	"usage_update": true, "session_info_update": true,
}

// maxUpdateKind bounds the kind an agent names in an update acpflow
// records without knowing it.
const maxUpdateKind = 64

// ownUpdate handles a session/update that acpflow reads itself instead of
// through the SDK's decode, and reports true for it: a usage_update
// (usage.go: the SDK's int counts would drop it), and a kind the SDK does
// not decode (newerNotified). One peek at the kind serves both, so the
// message chunks that make up most updates are read once before the SDK's
// decode, not once per special kind.
func (p *proc) ownUpdate(params json.RawMessage) bool {
	var peek struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if gojson.Unmarshal(params, &peek) != nil {
		return false
	}
	kind := peek.Update.SessionUpdate
	if kind != "usage_update" && sdkUpdates[kind] {
		return false
	}
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if gojson.Unmarshal(params, &n) != nil || len(n.Update) == 0 {
		return false
	}
	c := p.client(acp.SessionId(n.SessionID))
	switch {
	case c == nil:
		p.gate.handledOne()
	case kind == "usage_update":
		c.usageNotified(n.SessionID, n.Update)
	default:
		c.newerNotified(n.SessionID, kind, n.Update)
	}
	return true
}

// newerNotified records an update of a kind the SDK does not decode —
// ACP's notice, compaction_update and compaction_summary_chunk, or any
// kind a newer agent sends — as the agent sent it: a step_update event of
// its kind (the transcript holds every line anyway). It is never the
// step's output, and never fails the turn.
func (c *client) newerNotified(sessionID, kind string, update json.RawMessage) {
	if c.gate != nil {
		defer c.gate.handledOne()
	}
	if !c.ours(acp.SessionId(sessionID)) {
		return
	}
	if kind == "" {
		kind = "unknown"
	}
	c.inv.Emit(acpagent.AgentUpdate{Kind: termtext.Cut(kind, maxUpdateKind), Update: update})
}
