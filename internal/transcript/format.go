package transcript

import (
	"encoding/json"

	"github.com/acpflow/acpflow/decisions"
)

// The format's own types. A Step holds acpflow's permission records
// (decisions.Permission), which the rest of acpflow reads and writes;
// in a file each is a permissionRecord, whose field names are those of
// acpflow-transcript/1. A rename or a new field in decisions changes no
// file: the format changes here, deliberately, with Format
// (testdata/format.golden pins it).

// stepJSON is a step attempt as the format writes it, in this order.
type stepJSON struct {
	Step        string             `json:"step"`
	Index       *int               `json:"index,omitempty"`
	Attempt     int                `json:"attempt"`
	Agent       string             `json:"agent,omitempty"`
	Truncated   bool               `json:"truncated,omitempty"`
	Messages    []Message          `json:"messages"`
	Permissions []permissionRecord `json:"permissions,omitempty"`
	Spawn       *Spawn             `json:"spawn,omitempty"`
	Model       *Model             `json:"model,omitempty"`
}

// permissionRecord is a decisions.Permission as the format writes it.
type permissionRecord struct {
	ToolCallID   string             `json:"tool_call_id"`
	Kind         string             `json:"kind"`
	Title        string             `json:"title"`
	Command      string             `json:"command"`
	Locations    []toolLocation     `json:"locations"`
	Decision     decisions.Decision `json:"decision"`
	Would        decisions.Decision `json:"would,omitempty"`
	Status       string             `json:"status,omitempty"`
	Outcome      string             `json:"outcome"`
	OptionID     string             `json:"option_id"`
	Layer        decisions.Layer    `json:"layer"`
	Policy       decisions.Source   `json:"policy"`
	Rule         string             `json:"rule"`
	Reason       string             `json:"reason"`
	Ask          string             `json:"ask,omitempty"`
	Approval     string             `json:"approval_id,omitempty"`
	AnsweredBy   string             `json:"answered_by,omitempty"`
	AnsweredAt   string             `json:"answered_at,omitempty"`
	PolicyStderr string             `json:"policy_stderr,omitempty"`
}

// toolLocation is a decisions.ToolLocation as the format writes it.
type toolLocation struct {
	Path        string `json:"path"`
	Line        int    `json:"line"`
	InWorkspace bool   `json:"in_workspace"`
}

// MarshalJSON writes s in the format, whoever encodes it.
func (s Step) MarshalJSON() ([]byte, error) { return json.Marshal(s.file()) }

// UnmarshalJSON reads s from the format.
func (s *Step) UnmarshalJSON(b []byte) error {
	var f stepJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = f.step()
	return nil
}

// file is s as the format writes it.
func (s *Step) file() *stepJSON {
	f := &stepJSON{Step: s.Step, Index: s.Index, Attempt: s.Attempt, Agent: s.Agent, Truncated: s.Truncated,
		Messages: s.Messages, Spawn: s.Spawn, Model: s.Model}
	if s.Permissions != nil {
		f.Permissions = make([]permissionRecord, len(s.Permissions))
		for i, p := range s.Permissions {
			f.Permissions[i] = recordOf(p)
		}
	}
	return f
}

// step is the Step f describes.
func (f *stepJSON) step() Step {
	s := Step{Step: f.Step, Index: f.Index, Attempt: f.Attempt, Agent: f.Agent, Truncated: f.Truncated,
		Messages: f.Messages, Spawn: f.Spawn, Model: f.Model}
	if f.Permissions != nil {
		s.Permissions = make([]decisions.Permission, len(f.Permissions))
		for i, r := range f.Permissions {
			s.Permissions[i] = r.record()
		}
	}
	return s
}

func recordOf(p decisions.Permission) permissionRecord {
	r := permissionRecord{
		ToolCallID: p.ToolCallID, Kind: p.Kind, Title: p.Title, Command: p.Command,
		Decision: p.Decision, Would: p.Would, Status: p.Status, Outcome: p.Outcome, OptionID: p.OptionID,
		Layer: p.Layer, Policy: p.Policy, Rule: p.Rule, Reason: p.Reason,
		Ask: p.Ask, Approval: p.Approval, AnsweredBy: p.AnsweredBy, AnsweredAt: p.AnsweredAt, PolicyStderr: p.PolicyStderr,
	}
	if p.Locations != nil {
		r.Locations = make([]toolLocation, len(p.Locations))
		for i, l := range p.Locations {
			r.Locations[i] = toolLocation(l)
		}
	}
	return r
}

func (r *permissionRecord) record() decisions.Permission {
	p := decisions.Permission{
		ToolCallID: r.ToolCallID, Kind: r.Kind, Title: r.Title, Command: r.Command,
		Decision: r.Decision, Would: r.Would, Status: r.Status, Outcome: r.Outcome, OptionID: r.OptionID,
		Layer: r.Layer, Policy: r.Policy, Rule: r.Rule, Reason: r.Reason,
		Ask: r.Ask, Approval: r.Approval, AnsweredBy: r.AnsweredBy, AnsweredAt: r.AnsweredAt, PolicyStderr: r.PolicyStderr,
	}
	if r.Locations != nil {
		p.Locations = make([]decisions.ToolLocation, len(r.Locations))
		for i, l := range r.Locations {
			p.Locations[i] = decisions.ToolLocation(l)
		}
	}
	return p
}
