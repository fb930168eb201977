package policies

import (
	"context"
	"time"

	gojson "github.com/goccy/go-json"
)

// Decision is what a permission policy chose (docs/policies.md#permission-policies).
type Decision string

const (
	Allow        Decision = "allow"         // first allow_once; never an allow_always
	AllowAlways  Decision = "allow_always"  // first allow_always, else first allow_once
	Reject       Decision = "reject"        // first reject_once, else first reject_always
	RejectAlways Decision = "reject_always" // first reject_always, else first reject_once
	Cancel       Decision = "cancel"        // answer the `cancelled` outcome
	// Ask puts the request to a person, who picks one of the agent's
	// options; with no one to ask, the policy's ask-fallback decides
	// (AnswerAsking).
	Ask Decision = "ask"
)

// ToolLocation is one file a tool call touches.
type ToolLocation struct {
	Path        string `json:"path"`
	Line        int    `json:"line"`
	InWorkspace bool   `json:"in_workspace"`
}

// Tool is the tool call a permission is asked for, flattened for rules.
type Tool struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"`
	Title     string         `json:"title"`
	Status    string         `json:"status"`
	RawInput  any            `json:"raw_input"`
	Command   string         `json:"command"` // the command line it runs: see CommandLine
	Locations []ToolLocation `json:"locations"`
}

// Option is one permission option the agent offered.
type Option struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // allow_once | allow_always | reject_once | reject_always
}

// PermissionRequest is the input of a permission policy, as expr
// environment and as WASM input (docs/policies.md#permission-policies).
type PermissionRequest struct {
	Request
	Tool    Tool           `json:"tool"`
	Options []Option       `json:"options"`
	Config  map[string]any `json:"config"`
}

// Verdict is a permission policy's answer.
type Verdict struct {
	Decision Decision
	Rule     string // "1"-based rule index, "default", "shorthand", or a module file name
	Reason   string
	Stderr   string // what a WASM module wrote to stderr (capped), for the record
	// Fallback is what decides an Ask when no one can be asked (the
	// policy's ask-fallback); "" means Reject.
	Fallback Decision
	// Timeout is how long an Ask waits for an answer before Fallback
	// decides (the policy's ask-timeout); 0 means DefaultAskTimeout.
	Timeout time.Duration
}

// Permission answers permission requests. Implementations must be safe for
// concurrent use: one policy serves every step that names it.
type Permission interface {
	DecidePermission(ctx context.Context, req *PermissionRequest) (Verdict, error)
}

// PermissionRecord is the record of one answered permission (docs/results.md).
type PermissionRecord struct {
	ToolCallID string `json:"tool_call_id"`
	Kind       string `json:"kind"`
	Title      string `json:"title"`
	// Command and Locations are the tool's, as the policy saw them.
	Command   string         `json:"command"`
	Locations []ToolLocation `json:"locations"`
	Decision  Decision       `json:"decision"`
	// Would is, for a call that ran without asking (Decision
	// DecisionUnasked), what the policy decides for it; else "".
	Would Decision `json:"would,omitempty"`
	// Status is, for a call that ran without asking, the status the
	// agent reported it ended with: "completed", or "failed" (a call that
	// started and failed, recorded all the same); else "".
	Status   string `json:"status,omitempty"`
	Outcome  string `json:"outcome"`   // "selected" or "cancelled"; "" for an unasked call
	OptionID string `json:"option_id"` // empty when cancelled
	// Layer is which layer decided: LayerOuter (an outer policy file,
	// named by Policy) or LayerWorkflow.
	Layer Layer `json:"layer"`
	// Policy is where the policy that decided was configured: workflow,
	// step or default, or, with LayerOuter, the outer policy file.
	Policy Source `json:"policy"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	// Ask says who answered when the policy decided ask: "person" (the
	// option a person picked), "grant" (an earlier answer given for the
	// rest of the run), "fallback" (no one to ask, or no answer within
	// the ask-timeout: the policy's ask-fallback) or "unanswered" (the
	// turn ended while waiting); Decision is then what the answer amounts
	// to.
	Ask string `json:"ask,omitempty"`
	// Approval is the id of the pending approval the request was (or, for
	// a grant, once was) put to people under (docs/policies.md#approvals).
	Approval string `json:"approval_id,omitempty"`
	// AnsweredBy is which approver answered: terminal, ui, webhook or cli.
	AnsweredBy string `json:"answered_by,omitempty"`
	// AnsweredAt is when, RFC 3339 in UTC.
	AnsweredAt string `json:"answered_at,omitempty"`
	// PolicyStderr is what a WASM policy module wrote to stderr.
	PolicyStderr string `json:"policy_stderr,omitempty"`
}

// DecodePermissionRequest decodes a permission request from its JSON
// (docs/policies.md#the-request), as `acpflow policy eval` reads it, and normalises its tool as the
// ACP client does (Tool.Normalize): tool.command derived when the JSON does
// not carry it, raw_input {} when absent.
//
// # Notes
//
// It uses github.com/goccy/go-json: decoding is most of a decision's cost
// (encoding/json takes 12 µs for a typical request, the rules 1.3 µs), and
// go-json decodes the same request in under 3 µs.
func DecodePermissionRequest(data []byte) (*PermissionRequest, error) {
	var req PermissionRequest
	if err := gojson.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	req.Tool.Normalize()
	return &req, nil
}
