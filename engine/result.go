package engine

import (
	"encoding/json"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Status is where a run, a step or a batch is: running until it ends,
// then succeeded, failed or cancelled (a step may also be skipped). It is
// the one set of words of the result JSON, the event stream and the run
// store (which uses this type).
type Status string

// Statuses (docs: the result JSON).
const (
	StatusRunning Status = "running" // started and not ended; the run store's word
	// StatusWaiting is a running run, as a reader of the run store sees
	// it, while a step of it waits for a person's answer (an approval):
	// never recorded, never a result's.
	StatusWaiting   Status = "waiting"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusSkipped   Status = "skipped" // steps only
	StatusCancelled Status = "cancelled"
)

// Live reports whether a run with status s has not ended: running, or
// waiting for a person.
func (s Status) Live() bool { return s == StatusRunning || s == StatusWaiting }

// RunResult is one run's result, the object `--output` writes (docs/results.md).
type RunResult struct {
	RunID      string         `json:"run_id"`
	Workflow   string         `json:"workflow"`
	Status     Status         `json:"status"`
	Error      string         `json:"error,omitempty"`
	Workspace  string         `json:"workspace"`
	Inputs     map[string]any `json:"inputs"`
	Outputs    map[string]any `json:"outputs"`
	StartedAt  time.Time      `json:"started_at"`
	DurationMS int64          `json:"duration_ms"`
	// Usage sums what the steps' agents reported; nil when none did.
	Usage *RunUsage              `json:"usage,omitempty"`
	Steps map[string]*StepResult `json:"steps"`
	// Permissions are the permission requests acpflow answered for no
	// step's turn (a session kept between turns, a teardown): `cancelled`,
	// each with the rule and reason saying why. Absent when there were none.
	Permissions []policies.PermissionRecord `json:"permissions,omitempty"`
	// Worktree is the run's own git worktree (the workflow's isolation:
	// worktree); nil: none.
	Worktree *Worktree `json:"worktree,omitempty"`
	// OutputNames are the workflow's output names in the order its file
	// writes them: the order a person reads Outputs in (a map has none).
	OutputNames []string `json:"-"`
}

// StepResult is one step's result.
type StepResult struct {
	Status     Status `json:"status"`
	StopReason string `json:"stop_reason"`
	Output     any    `json:"output"` // a string; a list of them for for-each
	Final      any    `json:"final"`  // the last agent message alone; a list for for-each
	// JSON is the value of a step with an output schema (steps.StructuredStep)
	// that succeeded: its final message parsed as JSON, matching the
	// schema; a list for for-each. Nil (and absent from the JSON) for any
	// other step.
	JSON        any                         `json:"json,omitempty"`
	Error       string                      `json:"error"`
	Attempts    int                         `json:"attempts"`
	DurationMS  int64                       `json:"duration_ms"`
	SessionID   string                      `json:"session_id"`
	Permissions []policies.PermissionRecord `json:"permissions"`
	// Usage is what the agent reported of the step's tokens and cost, all
	// attempts (and for-each elements) summed; nil when it reported nothing.
	Usage *steps.Usage `json:"usage,omitempty"`
	// Sandbox is what the last attempt's sandbox enforced (the first
	// element's for for-each); nil without one.
	Sandbox *steps.SandboxRecord `json:"sandbox,omitempty"`
	// ExitCode is how a shell step's command exited (steps.Result.ExitCode);
	// for for-each, the first element that failed's, else 0 when every
	// element's command exited 0. Nil (and absent from the JSON) for any
	// other kind of step.
	ExitCode *int `json:"exit_code,omitempty"`
	// Worktree is the step's own worktree (its isolation: worktree);
	// Worktrees, for a for-each step, its elements', in element order.
	// Nil without one.
	Worktree  *Worktree   `json:"worktree,omitempty"`
	Worktrees []*Worktree `json:"worktrees,omitempty"`
	// Stderr is the kept tail of the agent's stderr; it goes to the run
	// store and `show`, not to the result JSON.
	Stderr string `json:"-"`
}

// Skipped is the result of a step that did not run, saying why.
func Skipped(why string) *StepResult {
	return &StepResult{Status: StatusSkipped, Error: why, Permissions: []policies.PermissionRecord{}}
}

// Errored is the result of a step that failed without a turn of its
// agent (an if: that cannot be decided, a for-each value that is no
// list): stop reason error, saying why.
func Errored(why string) *StepResult {
	return &StepResult{Status: StatusFailed, StopReason: string(steps.Error), Error: why, Permissions: []policies.PermissionRecord{}}
}

// scopeValue is the step as expressions see it: steps.<id>.{output,
// final, stop_reason, status, json, exit_code}. A structured step's json
// is its checked value (nil unless it succeeded); any other step's is its
// output parsed as JSON when it is JSON. exit_code is a shell step's (nil
// where the result has none: an agent step, a command acpflow stopped).
func (s *StepResult) scopeValue(structured bool) map[string]any {
	value := s.JSON
	if !structured {
		value = parseJSON(s.Output)
	}
	var exitCode any
	if s.ExitCode != nil {
		exitCode = *s.ExitCode
	}
	return map[string]any{
		"output":      s.Output,
		"final":       s.Final,
		"stop_reason": s.StopReason,
		"status":      string(s.Status), // a plain string: expr compares a named string type to "succeeded" as unequal
		"json":        value,
		"exit_code":   exitCode,
	}
}

// parseJSON is the output parsed as JSON when it is JSON, else nil.
func parseJSON(out any) any {
	s, ok := out.(string)
	if !ok {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil
	}
	return v
}
