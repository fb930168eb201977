package runs

import (
	"maps"
	"slices"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
)

// RunJSON is a run as `runs --json` and `show --json` print it (and the web
// UI's /api/runs serves it), with the field names of the result JSON
// (docs/results.md).
func RunJSON(r Run) map[string]any {
	m := map[string]any{
		"run_id": r.ID, "workflow": r.Workflow, "workflow_file": r.WorkflowFile, "status": r.Status,
		"error": r.Error, "inputs": r.Inputs, "outputs": r.Outputs, "workspace": r.Workspace,
		"started_at": r.StartedAt.UTC().Format(time.RFC3339Nano), "duration_ms": r.DurationMS,
	}
	if !r.EndedAt.IsZero() {
		m["ended_at"] = r.EndedAt.UTC().Format(time.RFC3339Nano)
	}
	if r.BatchID != "" {
		m["batch_id"], m["batch_line"] = r.BatchID, r.BatchLine
	}
	if r.Usage != nil {
		m["usage"] = r.Usage
	}
	if r.TraceID != "" {
		m["trace_id"] = r.TraceID
	}
	return m
}

// DetailJSON is a run as `show --json` prints it: the run as RunJSON has
// it, and each step's result (as the run store keeps it, runs.StepResult)
// with the kept tail of its stderr, and a for-each step's elements done
// (els, Service.Elements), by index.
func DetailJSON(d *RunDetail, els map[string][]Element) map[string]any {
	m := RunJSON(d.Run)
	stepsOut := map[string]any{}
	for _, st := range d.Steps {
		res := StepResult(st)
		perms := res.Permissions
		if perms == nil {
			perms = []policies.PermissionRecord{}
		}
		step := map[string]any{
			"status": res.Status, "stop_reason": res.StopReason, "output": res.Output, "final": res.Final, "error": res.Error,
			"attempts": res.Attempts, "duration_ms": res.DurationMS, "session_id": res.SessionID,
			"permissions": perms, "stderr": res.Stderr,
		}
		if res.Usage != nil {
			step["usage"] = res.Usage
		}
		if res.JSON != nil {
			step["json"] = res.JSON // as in the result: only a structured step's
		}
		if res.ExitCode != nil {
			step["exit_code"] = *res.ExitCode // as in the result: only a shell step's
		}
		if res.Sandbox != nil {
			step["sandbox"] = res.Sandbox // as in the result: only a sandboxed step's
		}
		if done := els[st.StepID]; len(done) > 0 {
			step["elements"] = elementsJSON(done)
		}
		stepsOut[st.StepID] = step
	}
	m["steps"] = stepsOut
	if len(d.Approvals) > 0 {
		list := make([]map[string]any, len(d.Approvals))
		for i, a := range d.Approvals {
			list[i] = ApprovalJSON(a)
		}
		m["approvals"] = list
	}
	// The worktrees, where the result has them (isolation: worktree).
	for _, wt := range d.Worktrees {
		step, _ := stepsOut[wt.Step].(map[string]any)
		switch {
		case wt.Step == "":
			m["worktree"] = wt
		case step == nil:
		case wt.Index != nil:
			list, _ := step["worktrees"].([]*engine.Worktree)
			step["worktrees"] = append(list, wt)
		default:
			step["worktree"] = wt
		}
	}
	return m
}

// elementsJSON is a for-each step's elements done, by index: each one's
// last element_end (a resumed run may have ended one twice).
func elementsJSON(done []Element) []map[string]any {
	byIndex := map[int]Element{}
	for _, el := range done {
		byIndex[el.Index] = el
	}
	indexes := slices.Sorted(maps.Keys(byIndex))
	out := make([]map[string]any, 0, len(indexes))
	for _, i := range indexes {
		el := byIndex[i]
		m := map[string]any{
			"index": i, "status": el.Status, "stop_reason": el.StopReason,
			"attempts": el.Attempts, "duration_ms": el.DurationMS,
		}
		if el.Error != "" {
			m["error"] = el.Error
		}
		out = append(out, m)
	}
	return out
}

// ApprovalsJSON is a list of approvals as `acpflow approvals --json` and
// the web UI's API give it: an array, empty when none is pending.
func ApprovalsJSON(list []Approval) []map[string]any {
	out := make([]map[string]any, len(list))
	for i, a := range list {
		out[i] = ApprovalJSON(a)
	}
	return out
}

// AnswerText words an approval's answer as `acpflow approve` and the web
// UI confirm it: "allow", or "allow for the rest of the run" for a grant.
func AnswerText(a Approval) string {
	if a.ForRun {
		return a.Decision + " for the rest of the run"
	}
	return a.Decision
}

// ApprovalJSON is an approval as `approvals --json`, `show --json`,
// export and the web UI's API give it (docs/policies.md#approvals).
func ApprovalJSON(a Approval) map[string]any {
	m := map[string]any{
		"approval_id": a.ID, "run_id": a.RunID, "workflow": a.Workflow, "step": a.StepID, "status": a.Status,
		"rule": a.Rule, "reason": a.Reason, "fallback": a.Fallback,
		"created_at": a.CreatedAt.UTC().Format(time.RFC3339Nano), "expires_at": a.Deadline.UTC().Format(time.RFC3339Nano),
	}
	if r := a.Request; r != nil {
		locs := r.Tool.Locations
		if locs == nil {
			locs = []policies.ToolLocation{}
		}
		m["agent"] = r.Agent
		m["tool"] = map[string]any{"kind": r.Tool.Kind, "title": r.Tool.Title, "command": r.Tool.Command, "locations": locs}
	}
	if a.Status == ApprovalAnswered {
		answer := map[string]any{"decision": a.Decision, "by": a.AnsweredBy, "at": a.AnsweredAt.UTC().Format(time.RFC3339Nano), "for_run": a.ForRun}
		if a.OptionID != "" {
			answer["option_id"] = a.OptionID
		}
		m["answer"] = answer
	}
	late := make([]map[string]any, len(a.Late))
	for i, l := range a.Late {
		late[i] = map[string]any{"decision": l.Decision, "for_run": l.ForRun, "by": l.By, "at": l.At.UTC().Format(time.RFC3339Nano)}
	}
	m["late"] = late
	return m
}
