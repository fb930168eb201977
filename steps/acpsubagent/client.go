package acpsubagent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// client is acpflow's side of one ACP connection: it collects the answer,
// records what else the agent streams, and answers permission requests
// through the step's policy. It serves nothing else: no file system, no
// terminals (every other agent request gets -32601).
type client struct {
	inv  *steps.Invocation
	cwd  string
	gate *stdoutGate // nil when the client is not a step's (probe)

	mu          sync.Mutex
	sessionID   string // set once session/new answered; updates for others are ignored
	output      transcriptText
	permissions []policies.PermissionRecord
	cancelled   bool // a cancel was sent: pending permissions are answered `cancelled`
	// overflow is closed when the output passed its limit.
	overflow     chan struct{}
	overflowOnce sync.Once
}

// transcriptText is the agent's answer: every message, in order, a blank
// line between two messages that something else (a tool call, a plan, a
// thought) came between, and the last message alone. It keeps at most
// limit bytes of output (final is a part of it).
type transcriptText struct {
	all, last strings.Builder
	limit     int64
	broken    bool // an update other than a message chunk came since the last chunk
	full      bool // the limit was reached: nothing more is kept
}

// write adds a message chunk; false once the limit is reached.
func (t *transcriptText) write(text string) bool {
	if t.full {
		return false
	}
	sep := ""
	if t.broken && t.all.Len() > 0 {
		t.last.Reset()
		sep = "\n\n"
	}
	t.broken = false
	if left := int(t.limit) - t.all.Len(); len(sep)+len(text) > left {
		t.full = true
		if len(sep) > left {
			return false
		}
		text = cutUTF8(text, left-len(sep))
	}
	t.all.WriteString(sep)
	t.all.WriteString(text)
	t.last.WriteString(text)
	return !t.full
}

// interrupt marks the end of the current message, if one has begun.
func (t *transcriptText) interrupt() {
	if t.all.Len() > 0 {
		t.broken = true
	}
}

// cutUTF8 is s cut to at most n bytes, not inside a character.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (c *client) setSession(id string) {
	c.mu.Lock()
	c.sessionID = id
	c.mu.Unlock()
}

func (c *client) ours(id acp.SessionId) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID != "" && string(id) == c.sessionID
}

func (c *client) markCancelled() {
	c.mu.Lock()
	c.cancelled = true
	c.mu.Unlock()
}

// quiesce waits, once the connection has closed, until every session/update
// the agent wrote has been handed to SessionUpdate: the SDK processes them
// on a goroutine of its own, and a request that failed on the closed
// connection does not wait for them. Partial text survives a crash, as in
// the seed. It gives up after limit (an update the SDK could not decode is
// never handed over).
func (c *client) quiesce(done <-chan struct{}, limit time.Duration) {
	select {
	case <-done:
	default:
		return // still connected: nothing is in flight on our account
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !c.gate.caughtUp() {
		time.Sleep(time.Millisecond)
	}
}

// snapshot returns the output, the last message and the permission records so far.
func (c *client) snapshot() (output, final string, perms []policies.PermissionRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.all.String(), c.output.last.String(), append([]policies.PermissionRecord(nil), c.permissions...)
}

// overflowed is closed once the output has passed its limit.
func (c *client) overflowed() <-chan struct{} { return c.overflow }

// SessionUpdate keeps agent_message_chunk text of this session as the
// output (see transcriptText); everything else goes to the event stream
// with its kind, and a tool call, a plan or a thought ends the message
// being streamed.
func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if c.gate != nil {
		defer c.gate.handledOne()
	}
	if !c.ours(n.SessionId) {
		return nil
	}
	u := n.Update
	if u.AgentMessageChunk != nil {
		text := ""
		if t := u.AgentMessageChunk.Content.Text; t != nil {
			text = t.Text
		}
		c.mu.Lock()
		wasFull := c.output.full
		kept := c.output.write(text)
		c.mu.Unlock()
		if wasFull {
			return nil // past max-output: neither kept nor logged
		}
		if !kept {
			c.overflowOnce.Do(func() { close(c.overflow) })
		}
		c.inv.Emit(steps.MessageChunk{Text: text})
		return nil
	}
	if endsMessage(u) {
		c.mu.Lock()
		c.output.interrupt()
		c.mu.Unlock()
	}
	kind, body := describeUpdate(u)
	c.inv.Emit(steps.AgentUpdate{Kind: kind, Update: body})
	return nil
}

// endsMessage reports whether an update comes between two agent messages
// (a tool call, a plan, a thought, the user's words), as opposed to
// bookkeeping (usage, modes, commands) that may arrive mid-message.
func endsMessage(u acp.SessionUpdate) bool {
	return u.AgentThoughtChunk != nil || u.UserMessageChunk != nil || u.ToolCall != nil ||
		u.ToolCallUpdate != nil || u.Plan != nil
}

// describeUpdate names an update's kind and returns its payload for the log.
func describeUpdate(u acp.SessionUpdate) (string, any) {
	switch {
	case u.AgentThoughtChunk != nil:
		return "agent_thought_chunk", u.AgentThoughtChunk
	case u.UserMessageChunk != nil:
		return "user_message_chunk", u.UserMessageChunk
	case u.ToolCall != nil:
		return "tool_call", u.ToolCall
	case u.ToolCallUpdate != nil:
		return "tool_call_update", u.ToolCallUpdate
	case u.Plan != nil:
		return "plan", u.Plan
	case u.AvailableCommandsUpdate != nil:
		return "available_commands_update", u.AvailableCommandsUpdate
	case u.CurrentModeUpdate != nil:
		return "current_mode_update", u.CurrentModeUpdate
	case u.ConfigOptionUpdate != nil:
		return "config_option_update", u.ConfigOptionUpdate
	case u.UsageUpdate != nil:
		return "usage_update", u.UsageUpdate
	case u.SessionInfoUpdate != nil:
		return "session_info_update", u.SessionInfoUpdate
	}
	return "unknown", nil
}

// RequestPermission asks the step's permission policy, within the outer
// policy, and answers with the option it selects. After a cancel, ACP
// requires the `cancelled` outcome.
func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	req := c.permissionRequest(p)
	c.mu.Lock()
	cancelled := c.cancelled
	c.mu.Unlock()
	var rec policies.PermissionRecord
	if cancelled || !c.ours(p.SessionId) {
		// No policy is asked: acpflow itself answers, and says why.
		rec = policies.PermissionRecord{
			ToolCallID: req.Tool.ID, Kind: req.Tool.Kind, Title: req.Tool.Title,
			Command: req.Tool.Command, Locations: req.Tool.Locations,
			Decision: policies.Cancel, Outcome: "cancelled", Layer: policies.LayerWorkflow, Policy: c.inv.PermissionSource,
			Rule: "turn-cancelled", Reason: "the turn was cancelled",
		}
		if !cancelled {
			rec.Rule, rec.Reason = "other-session", "request for another session"
		}
	} else {
		rec = c.inv.Outer.Answer(ctx, c.inv.Permission, c.inv.PermissionSource, req)
	}
	c.mu.Lock()
	c.permissions = append(c.permissions, rec)
	c.mu.Unlock()
	c.inv.Emit(steps.Permission{PermissionRecord: rec})

	if rec.Outcome == "selected" {
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
			Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(rec.OptionID)},
		}}, nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Cancelled: &acp.RequestPermissionOutcomeCancelled{},
	}}, nil
}

// permissionRequest flattens the ACP request into the policy's input
// (policies.FromACP, which `acpflow policy test` uses too).
func (c *client) permissionRequest(p acp.RequestPermissionRequest) *policies.PermissionRequest {
	return policies.FromACP(policies.Request{
		Workflow: c.inv.Workflow, RunID: c.inv.RunID, Step: c.inv.StepID,
		Agent: agentName(c.inv), Workspace: c.inv.Workspace, Cwd: c.cwd,
	}, p)
}

// decodeParams reads a request's params into v and validates them.
func decodeParams(params json.RawMessage, v interface{ Validate() error }) *acp.RequestError {
	if err := json.Unmarshal(params, v); err != nil {
		return acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	if err := v.Validate(); err != nil {
		return acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	return nil
}

// answerError is a handler's error as the agent is answered it, as the
// SDK's client side answers it.
func answerError(err error) *acp.RequestError {
	var re *acp.RequestError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, context.Canceled):
		return acp.NewRequestCancelled(map[string]any{"error": err.Error()})
	}
	return acp.NewInternalError(map[string]any{"error": err.Error()})
}
