// Package policies decides, inside acpflow, the two things a child agent may
// not decide for itself: the answer to each session/request_permission, and
// the environment the child is spawned with.
//
// A policy is an interface so that the built-in forms (shorthand, expr rules)
// and WASM modules plug in the same way. Every policy fails closed: an error
// from a policy means the permission is rejected or the spawn refused, never
// silently allowed.
package policies

import "github.com/acpflow/acpflow/decisions"

// Source says which configuration a policy came from; it is recorded with
// every decision (docs/results.md `policy`).
type Source = decisions.Source

const (
	SourceWorkflow = decisions.SourceWorkflow // policies: at the top of the workflow file
	SourceStep     = decisions.SourceStep     // policies: on the step, replacing the workflow's
	SourceDefault  = decisions.SourceDefault  // nothing configured: the built-in default
)

// Request is what every policy call knows about its context (docs/policies.md#permission-policies).
// Its names are the same in the JSON a WASM module reads and in the expr
// environment of a rule, which embeds it.
type Request struct {
	Kind      string `json:"kind" expr:"kind"` // "permission" or "env"
	Workflow  string `json:"workflow" expr:"workflow"`
	RunID     string `json:"run_id" expr:"run_id"`
	Step      string `json:"step" expr:"step"`
	Agent     string `json:"agent" expr:"agent"`
	Workspace string `json:"workspace" expr:"workspace"`
	Cwd       string `json:"cwd" expr:"cwd"`
}
