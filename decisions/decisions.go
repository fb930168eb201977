// Package decisions holds the records of permission decisions that several
// of acpflow's packages share (docs/results.md): what a policy chose, which
// layer and configuration decided, the files a tool call touched, and the
// record of one answered permission. policies makes them, the run store
// and the transcripts keep and read them.
//
// # Notes
//
// It imports nothing of acpflow, so that a package that only carries
// records (internal/transcript) depends on this leaf and not on the
// policies that decide (wazero's api package is the model).
package decisions

// Decision is what a permission policy chose (docs/policies.md#permission-policies).
type Decision string

const (
	Allow        Decision = "allow"         // first allow_once; never an allow_always
	AllowAlways  Decision = "allow_always"  // first allow_always, else first allow_once
	Reject       Decision = "reject"        // first reject_once, else first reject_always
	RejectAlways Decision = "reject_always" // first reject_always, else first reject_once
	Cancel       Decision = "cancel"        // answer the `cancelled` outcome
	// Ask puts the request to a person, who picks one of the agent's
	// options; with no one to ask, the policy's ask-fallback decides.
	Ask Decision = "ask"
	// Unasked is the Decision of the record of a tool call that ran
	// without asking; its Would says what the policy decides for it.
	Unasked Decision = "unasked"
)

// Valid reports whether d is one of the six decisions of docs/policies.md#permission-policies.
func (d Decision) Valid() bool {
	switch d {
	case Allow, AllowAlways, Reject, RejectAlways, Cancel, Ask:
		return true
	}
	return false
}

// Outcomes of a permission answer, as ACP names them.
const (
	OutcomeSelected  = "selected"
	OutcomeCancelled = "cancelled"
)

// Layer says which layer of policy decided a permission: an outer policy
// file, or the workflow's own policy (docs/policies.md#the-outer-policy).
type Layer string

const (
	LayerOuter    Layer = "outer"    // an outer policy file decided, and its decision was final
	LayerWorkflow Layer = "workflow" // the workflow's policy (its own, a step's, or the default)
)

// Source says which configuration a policy came from; it is recorded with
// every decision (docs/results.md `policy`).
type Source string

const (
	SourceWorkflow Source = "workflow" // policies: at the top of the workflow file
	SourceStep     Source = "step"     // policies: on the step, replacing the workflow's
	SourceDefault  Source = "default"  // nothing configured: the built-in default
)

// ToolLocation is one file a tool call touches.
type ToolLocation struct {
	Path        string `json:"path"`
	Line        int    `json:"line"`
	InWorkspace bool   `json:"in_workspace"`
}

// Permission is the record of one answered permission (docs/results.md).
type Permission struct {
	ToolCallID string `json:"tool_call_id"`
	Kind       string `json:"kind"`
	Title      string `json:"title"`
	// Command and Locations are the tool's, as the policy saw them.
	Command   string         `json:"command"`
	Locations []ToolLocation `json:"locations"`
	Decision  Decision       `json:"decision"`
	// Would is, for a call that ran without asking (Decision Unasked),
	// what the policy decides for it; else "".
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
