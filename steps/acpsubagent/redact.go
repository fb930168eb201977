package acpsubagent

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/redact"
)

// What a step must never record (docs/transcripts.md#what-is-kept): the
// attempt's scribe knows the secrets (package redact says which), and
// scrubs with them the transcript and everything else the step hands on
// (its events, output, error, stderr tail and permission records).

// sawAll scrubs every value a refused spawn's env policy was given,
// whatever its name: the policy's reason to refuse may quote any of them.
// The rules of what is never a secret hold.
func (a *attempt) sawAll(req *policies.EnvRequest) *redact.Scrubber {
	values := slices.Collect(maps.Values(req.Ambient))
	values = append(values, slices.Collect(maps.Values(req.Explicit))...)
	return redact.New(values, a.inv.Workspace, a.cwd)
}

// redactingSink scrubs the events of an attempt that carry the agent's
// words before they reach the run's sink (the terminal, --json, the run
// store).
type redactingSink struct {
	next   steps.Sink
	scribe *scribe
}

func (r redactingSink) Emit(ev steps.Event) {
	if !r.scribe.Empty() {
		ev.Data = r.scribe.event(ev.Data)
	}
	r.next.Emit(ev)
}

// request is req as approvers outside this process are shown it (the run
// store, the web UI, a webhook): its agent's words scrubbed as a
// permission record's are, its raw input scrubbed as a value.
func (s *scribe) request(req *policies.PermissionRequest) *policies.PermissionRequest {
	shown := *req
	rec := s.Permission(policies.PermissionRecord{Title: req.Tool.Title, Command: req.Tool.Command, Locations: req.Tool.Locations})
	shown.Tool.Title, shown.Tool.Command, shown.Tool.Locations = rec.Title, rec.Command, rec.Locations
	shown.Tool.RawInput = s.Value(req.Tool.RawInput)
	shown.Options = make([]policies.Option, len(req.Options))
	for i, o := range req.Options {
		o.Name = s.Text(o.Name)
		shown.Options[i] = o
	}
	shown.Config = nil
	return &shown
}

// event is d with the agent's words scrubbed.
func (s *scribe) event(d steps.EventData) steps.EventData {
	switch x := d.(type) {
	case acpagent.MessageChunk:
		x.Text = s.Text(x.Text)
		return x
	case acpagent.AgentUpdate:
		b, err := json.Marshal(x.Update)
		if err != nil {
			return x
		}
		if !s.MayHold(b) {
			return x
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return x
		}
		x.Update = s.Value(v)
		return x
	case steps.Permission:
		x.PermissionRecord = s.Permission(x.PermissionRecord)
		return x
	case steps.Unasked:
		x.PermissionRecord = s.Permission(x.PermissionRecord)
		return x
	case acpagent.Asking:
		x.Title = s.Text(x.Title)
		return x
	case steps.Warning:
		x.Message = s.Text(x.Message)
		return x
	case acpagent.SchemaRetry:
		errs := make([]string, len(x.Errors))
		for i, e := range x.Errors {
			errs[i] = s.Text(e)
		}
		x.Errors = errs
		return x
	}
	return d
}
