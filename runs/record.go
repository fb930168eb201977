package runs

import (
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// StepRecord and StepResult map a step's result to the run store's row and
// back: the one place that knows both shapes. began and ended are when the
// step's first attempt started and when it settled.
func StepRecord(runID, stepID string, ord int, res *engine.StepResult, began, ended time.Time) store.Step {
	perms := make([]store.Permission, len(res.Permissions))
	for i, p := range res.Permissions {
		perms[i] = storePermission(p)
	}
	return store.Step{
		RunID: runID, StepID: stepID, Ord: ord, Status: res.Status, StopReason: res.StopReason,
		Output: res.Output, Final: res.Final, JSON: res.JSON, Error: res.Error, Attempts: res.Attempts, SessionID: res.SessionID,
		Stderr: res.Stderr, StartedAt: began, EndedAt: ended, DurationMS: res.DurationMS, Permissions: perms,
		Usage: res.Usage, Sandbox: res.Sandbox, ExitCode: res.ExitCode,
	}
}

// StepResult is the result a stored step row holds (see StepRecord).
func StepResult(st store.Step) *engine.StepResult {
	perms := make([]policies.PermissionRecord, len(st.Permissions))
	for i, p := range st.Permissions {
		perms[i] = permissionRecord(p)
	}
	return &engine.StepResult{
		Status: st.Status, StopReason: st.StopReason, Output: st.Output, Final: st.Final, JSON: st.JSON, Error: st.Error,
		Attempts: st.Attempts, DurationMS: st.DurationMS, SessionID: st.SessionID, Permissions: perms,
		Stderr: st.Stderr, Usage: st.Usage, Sandbox: st.Sandbox, ExitCode: st.ExitCode,
	}
}

func storePermission(p policies.PermissionRecord) store.Permission {
	var locs []store.Location
	for _, l := range p.Locations {
		locs = append(locs, store.Location{Path: l.Path, Line: l.Line, InWorkspace: l.InWorkspace})
	}
	return store.Permission{
		ToolCallID: p.ToolCallID, Kind: p.Kind, Title: p.Title, Command: p.Command, Locations: locs,
		Decision: string(p.Decision), Would: string(p.Would), Status: p.Status, Outcome: p.Outcome, OptionID: p.OptionID, Layer: string(p.Layer), Policy: string(p.Policy), Rule: p.Rule, Reason: p.Reason,
		Ask: p.Ask, Approval: p.Approval, AnsweredBy: p.AnsweredBy, AnsweredAt: p.AnsweredAt,
	}
}

func permissionRecord(p store.Permission) policies.PermissionRecord {
	locs := make([]policies.ToolLocation, 0, len(p.Locations))
	for _, l := range p.Locations {
		locs = append(locs, policies.ToolLocation{Path: l.Path, Line: l.Line, InWorkspace: l.InWorkspace})
	}
	return policies.PermissionRecord{
		ToolCallID: p.ToolCallID, Kind: p.Kind, Title: p.Title, Command: p.Command, Locations: locs,
		Decision: policies.Decision(p.Decision), Outcome: p.Outcome, OptionID: p.OptionID,
		Would: policies.Decision(p.Would), Status: p.Status, Layer: layer(p.Layer), Policy: policies.Source(p.Policy), Rule: p.Rule, Reason: p.Reason,
		Ask: p.Ask, Approval: p.Approval, AnsweredBy: p.AnsweredBy, AnsweredAt: p.AnsweredAt,
	}
}

// layer is a stored record's layer: one that names none was the
// workflow's (docs/results.md: every record says which layer decided).
func layer(stored string) policies.Layer {
	if stored == "" {
		return policies.LayerWorkflow
	}
	return policies.Layer(stored)
}
