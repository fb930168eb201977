package policies

import (
	"context"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/acpflow/acpflow/decisions"
)

// The records of decisions are the decisions package's (a leaf that
// internal/transcript and the store share); policies makes them.
type (
	// Decision is what a permission policy chose (docs/policies.md#permission-policies).
	Decision = decisions.Decision
	// ToolLocation is one file a tool call touches.
	ToolLocation = decisions.ToolLocation
	// PermissionRecord is the record of one answered permission (docs/results.md).
	PermissionRecord = decisions.Permission
)

const (
	Allow        = decisions.Allow        // first allow_once; never an allow_always
	AllowAlways  = decisions.AllowAlways  // first allow_always, else first allow_once
	Reject       = decisions.Reject       // first reject_once, else first reject_always
	RejectAlways = decisions.RejectAlways // first reject_always, else first reject_once
	Cancel       = decisions.Cancel       // answer the `cancelled` outcome
	// Ask puts the request to a person, who picks one of the agent's
	// options; with no one to ask, the policy's ask-fallback decides
	// (AnswerAsking).
	Ask = decisions.Ask
)

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
