// Package engine runs a validated workflow: it schedules steps along their
// `needs`, evaluates `if:` and ${{ }} templates, retries, times out and
// cancels, and reports everything as one stream of events and a result.
//
// The engine does not read YAML: package workflows loads and checks a file
// and hands the engine a Workflow whose expressions are already compiled, so
// nothing that validation could have caught fails half-way through a run.
package engine

import (
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Workflow is a loaded, validated workflow, ready to run.
type Workflow struct {
	Name        string
	Description string
	// File is the workflow file's path; Hash is the SHA-256 of its bytes
	// (hex), which tells a resumed run whether the file changed.
	File string
	Hash string
	// MaxParallel bounds the steps in flight at once; the loader sets
	// DefaultMaxParallel where the file says nothing.
	MaxParallel int
	Inputs      []*Input
	Agents      map[string]*steps.Agent
	Policies    Policies
	// Approvals is the workflow's `approvals:` (a webhook its asks go
	// to); nil: none.
	Approvals *policies.Approvals
	Steps     []*Step // in file order
	Outputs   []*Output
	// Budget is what one run may spend (`budget:`); zero: no limit.
	Budget Budget
	// Isolation is the workflow's `isolation: worktree` (nil: none): each
	// run works in a git worktree of its own (docs/worktrees.md).
	Isolation *Isolation
	// Sandbox is the workflow's `sandbox:`, the default of every agent
	// that sets none (the loader copies it there) and of every step that
	// names no agent (steps.Invocation.Sandbox); nil: none.
	Sandbox *steps.Sandbox
	// Modules are the WASM modules the policies load, as the file names
	// them (relative to its directory, or absolute), in file order: what
	// a worker on another machine needs beside the file.
	Modules []string
}

// Input is a declared workflow input.
type Input struct {
	Name        string
	Type        string // string | number | boolean | object | array
	Required    bool
	Default     any
	HasDefault  bool
	Description string
}

// Output is one of the run's outputs.
type Output struct {
	Name  string
	Value *Template
}

// Policies are the policies of one level (workflow or step); nil fields are
// not set at that level.
type Policies struct {
	Permission policies.Permission
	Env        policies.Env
	// SandboxRequired is an outer policy file's `sandbox: required`: every
	// agent runs sandboxed, whatever the workflow says.
	SandboxRequired bool
	// Telemetry is an outer policy file's `telemetry:` (docs/traces.md);
	// nil: none.
	Telemetry *policies.Telemetry
	// Approvals is an outer policy file's `approvals:` (a webhook its
	// asks go to); nil: none.
	Approvals *policies.Approvals
}

// Step is a step of the workflow.
type Step struct {
	ID   string
	Uses string
	// Run is the prepared step kind.
	Run steps.Step
	// With holds the step's `with:` values; every string in it is a
	// compiled template (a *Template), nested maps and lists keep their shape.
	With            map[string]any
	Needs           []string
	If              *Expr // nil: always
	Timeout         time.Duration
	Retries         int
	ContinueOnError bool
	Policies        Policies
	// ForEach, when set, runs the step once per element of the list it
	// yields, with `item` and `index` in scope.
	ForEach            *Expr
	ForEachMaxParallel int
	// Isolation is the step's `isolation: worktree` (nil: none): the step
	// (each for-each element) works in a git worktree of its own.
	Isolation *Isolation
}

// DefaultStepTimeout bounds a step that sets no `timeout:` (the loader sets
// it; `timeout: 0` turns it off): long enough for an agent's longest turns
// measured, short enough that a stalled agent does not hold a run, or a
// CI job, forever (DESIGN.md).
const DefaultStepTimeout = 30 * time.Minute

// Structured reports whether the step's result carries a value checked
// against a schema (steps.StructuredStep, acp-subagent's output-schema):
// its steps.ID.json is that value, not its output parsed as JSON.
func (st *Step) Structured() bool {
	ss, ok := st.Run.(steps.StructuredStep)
	return ok && ss.JSONShape() != nil
}
