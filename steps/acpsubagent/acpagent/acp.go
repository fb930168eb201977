package acpagent

import (
	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
)

// FromACP is the policy input of an ACP session/request_permission
// (docs/policies.md#the-request): the tool call flattened, its command
// derived and its raw input defaulted (policies.Tool.Normalize), each location
// judged against where.Workspace and where.Cwd, and the options in the
// agent's order. where says in which run, step and directories the request
// was made; its Kind is set here.
//
// The ACP client builds every live request with it, and `acpflow policy
// test` every recorded one, so a what-if sees the request the live policy
// saw.
//
// # Notes
//
// in_workspace is judged on the file system as it is now
// (policies.InWorkspace): a request rebuilt later from a transcript is
// judged against the directories as they are then.
func FromACP(where policies.Request, p acp.RequestPermissionRequest) *policies.PermissionRequest {
	tc := p.ToolCall
	tool := ToolFromACP(where, ToolCallFields{ID: string(tc.ToolCallId), Kind: tc.Kind, Title: tc.Title, Status: tc.Status, RawInput: tc.RawInput, Locations: tc.Locations})
	opts := make([]policies.Option, 0, len(p.Options))
	for _, o := range p.Options {
		opts = append(opts, policies.Option{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	where.Kind = policies.KindPermission
	return &policies.PermissionRequest{Request: where, Tool: tool, Options: opts, Config: map[string]any{}}
}

// ToolCallFields are the fields of an ACP tool call as a policy reads
// them, from a permission request or from the tool_call and
// tool_call_update notifications that announce and report it (merged:
// a nil field is one no message set).
type ToolCallFields struct {
	ID        string
	Kind      *acp.ToolKind
	Title     *string
	Status    *acp.ToolCallStatus
	RawInput  any
	Locations []acp.ToolCallLocation
}

// ToolFromACP flattens a tool call for a policy: its command derived and
// its raw input defaulted (policies.Tool.Normalize), each location judged against
// where.Workspace and where.Cwd. The unasked-call check judges a call
// that ran without a request through it, so that it sees the call as a
// request for it would have shown it.
func ToolFromACP(where policies.Request, tc ToolCallFields) policies.Tool {
	tool := policies.Tool{ID: tc.ID, RawInput: tc.RawInput}
	if tc.Kind != nil {
		tool.Kind = string(*tc.Kind)
	}
	if tc.Title != nil {
		tool.Title = *tc.Title
	}
	if tc.Status != nil {
		tool.Status = string(*tc.Status)
	}
	tool.Locations = make([]policies.ToolLocation, 0, len(tc.Locations))
	for _, l := range tc.Locations {
		loc := policies.ToolLocation{Path: l.Path, InWorkspace: policies.InWorkspace(l.Path, where.Workspace, where.Cwd)}
		if l.Line != nil {
			loc.Line = *l.Line
		}
		tool.Locations = append(tool.Locations, loc)
	}
	tool.Normalize()
	return tool
}
