package acpagent

import (
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// The step updates of an acp-subagent step (docs/results.md): what the
// kind did with its agent's process and session, and what the agent sent.
// Each is a steps.Update; the stream writes them as every other event.

var (
	_ steps.Update = ModeRestored{}
	_ steps.Update = Env{}
	_ steps.Update = Spawned{}
	_ steps.Update = Initialized{}
	_ steps.Update = Session{}
	_ steps.Update = Reused{}
	_ steps.Update = SessionConfigured{}
	_ steps.Update = MessageChunk{}
	_ steps.Update = AgentUpdate{}
	_ steps.Update = CancelSent{}
	_ steps.Update = Asking{}
	_ steps.Update = SchemaRetry{}
	_ steps.Update = Descendant{}
	_ steps.Update = Teardown{}
)

// ModeRestored is the mode guard setting a session back to the mode acpflow
// chose, from one the agent switched to without being asked (or, with
// Option, a permission config option back to the value acpflow left it at).
type ModeRestored struct {
	Option string `json:"option,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// Env is the env policy's decision for a spawn: how many variables the
// child got, never their names or values.
type Env struct {
	Policy       string `json:"policy"`
	Rule         string `json:"rule"`
	Names        int    `json:"names"`
	PolicyStderr string `json:"policy_stderr,omitempty"`
	// Outer is what each outer policy file decided first (absent without
	// an outer env policy).
	Outer []policies.OuterEnvRule `json:"outer,omitempty"`
}

// Spawned is a child process started, leader of its own process group.
type Spawned struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	Cwd        string `json:"cwd"`
}

// Initialized is an agent's answer to initialize. AgentName and
// AgentVersion are set when the agent described itself.
type Initialized struct {
	ProtocolVersion int     `json:"protocol_version"`
	AgentName       *string `json:"agent_name,omitempty"`
	AgentVersion    *string `json:"agent_version,omitempty"`
}

// Session is the session a step's turn runs in.
type Session struct {
	SessionID string `json:"session_id"`
	// Via says how a step that continues an earlier step's session came
	// by it: continued (the live process), resumed, loaded or forked; From
	// names that step. Both are absent for a new session.
	Via  string `json:"via,omitempty"`
	From string `json:"from,omitempty"`
	// StartMode is the mode the agent reported the session in, before
	// acpflow set its own; WideningOptions are the values of its
	// permission config options that would let it decide alone, as
	// "ID=VALUE" (`acpflow agents verify` reports both).
	StartMode       string   `json:"start_mode,omitempty"`
	WideningOptions []string `json:"widening_options,omitempty"`
}

// Reused is a pooled agent process (`reuse: true`) taken for the step
// instead of a spawn: the same process an earlier step or run started.
type Reused struct {
	PID int `json:"pid"`
}

// SessionConfigured is the mode and config options set on the session.
type SessionConfigured struct {
	Mode   string            `json:"mode,omitempty"`
	Config map[string]string `json:"config,omitempty"`
}

// MessageChunk is a piece of the agent's message text.
type MessageChunk struct {
	Text string `json:"text"`
}

// AgentUpdate is any other update the agent sent, under its ACP kind
// (tool_call, plan, usage_update, …), with its body as the agent sent it.
type AgentUpdate struct {
	Kind   string `json:"-"`
	Update any    `json:"update,omitempty"`
}

// CancelSent is a session/cancel sent to the agent.
type CancelSent struct{}

// Asking is a permission request put to a person (the policy decided
// ask); its permission event comes when they answer.
type Asking struct {
	ToolCallID string `json:"tool_call_id"`
	Title      string `json:"title"`
	// Approval is the pending approval's id (acpflow approve ID), ""
	// when only the terminal is asked; Approvers are who may answer:
	// terminal, ui, cli, webhook (docs/policies.md#approvals).
	Approval  string   `json:"approval_id,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

// SchemaRetry is a follow-up prompt sent in the step's session because
// its final message did not match the step's output schema: the Retry-th
// of at most Retries, with what the schema found wrong (bounded).
type SchemaRetry struct {
	Retry   int      `json:"retry"`
	Retries int      `json:"retries"`
	Errors  []string `json:"errors"`
}

// Descendant is a process seen below a child, also one that left its
// process group (setsid).
type Descendant struct {
	AgentPID   int    `json:"agent_pid"`
	PID        int    `json:"pid"`
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"`
}

// Teardown is how a child and its process group ended. Tier is the rung
// of the ladder that ended it; Descendants counts the processes seen below
// it, EscapedKilled those outside its group that had to be killed.
type Teardown struct {
	PID                    int    `json:"pid"`
	Tier                   string `json:"tier"`
	Exit                   string `json:"exit"`
	DurationMS             int64  `json:"duration_ms"`
	EscapedKilled          int    `json:"escaped_killed,omitempty"`
	Descendants            int    `json:"descendants,omitempty"`
	Error                  string `json:"error,omitempty"`
	NonProtocolLines       int64  `json:"non_protocol_lines,omitempty"`
	UnhandledNotifications int64  `json:"unhandled_notifications,omitempty"`
}

func (ModeRestored) EventType() string      { return "step_update" }
func (Env) EventType() string               { return "step_update" }
func (Spawned) EventType() string           { return "step_update" }
func (Initialized) EventType() string       { return "step_update" }
func (Session) EventType() string           { return "step_update" }
func (Reused) EventType() string            { return "step_update" }
func (SessionConfigured) EventType() string { return "step_update" }
func (MessageChunk) EventType() string      { return "step_update" }
func (AgentUpdate) EventType() string       { return "step_update" }
func (CancelSent) EventType() string        { return "step_update" }
func (Asking) EventType() string            { return "step_update" }
func (SchemaRetry) EventType() string       { return "step_update" }
func (Descendant) EventType() string        { return "step_update" }
func (Teardown) EventType() string          { return "step_update" }

func (ModeRestored) UpdateKind() string      { return "mode_restored" }
func (Env) UpdateKind() string               { return "env" }
func (Spawned) UpdateKind() string           { return "spawned" }
func (Initialized) UpdateKind() string       { return "initialized" }
func (Session) UpdateKind() string           { return "session" }
func (Reused) UpdateKind() string            { return "reused" }
func (SessionConfigured) UpdateKind() string { return "session_configured" }
func (MessageChunk) UpdateKind() string      { return "agent_message_chunk" }
func (u AgentUpdate) UpdateKind() string     { return u.Kind }
func (CancelSent) UpdateKind() string        { return "cancel_sent" }
func (Asking) UpdateKind() string            { return "asking" }
func (SchemaRetry) UpdateKind() string       { return "schema_retry" }
func (Descendant) UpdateKind() string        { return "descendant" }
func (Teardown) UpdateKind() string          { return "teardown" }
