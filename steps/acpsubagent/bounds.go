package acpsubagent

import (
	"fmt"
	"strconv"

	gojson "github.com/goccy/go-json"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps/redact"
)

// Bounds on one permission request as a policy is shown it
// (docs/acp-subagent.md#bounds-on-permission-requests). A request past any
// of them is refused without asking the policy, never cut: a rule that
// allows `git status*` would allow a command cut after "git status" whose
// tail the agent still runs.
const (
	// maxRequestBytes bounds the whole request as the policy sees it (its
	// JSON). An edit's raw input carries the file it writes
	// (claude-agent-acp's Write sends the whole content), so the bound is
	// what a file an agent writes in one call may reasonably be.
	maxRequestBytes = 1 << 20
	// maxToolText bounds the title, the command and each option's name:
	// policies.Commands reads lines of up to 128 KiB (heredocs that write
	// whole files), gemini-cli's title is its command, and an option's
	// name may quote it ("Always allow `CMD`").
	maxToolText = 128 << 10
	// maxToolWord bounds the tool call's id, kind and status, and each
	// option's id and kind: words, not texts.
	maxToolWord = 1 << 10
	// maxLocations and maxPathBytes bound the files a call touches
	// (PATH_MAX is 4096 on Linux).
	maxLocations = 1024
	maxPathBytes = 4096
	// maxOptions bounds the options offered; agents offer two to five.
	maxOptions = 64
)

// maxWaitingPermissions bounds the permission requests of one turn waiting
// for an answer at once (a policy or a person deciding). More are refused
// at once: an agent that floods requests holds no more of acpflow than
// this many.
const maxWaitingPermissions = 16

// oversized says which bound req is past, "" when none: the field, its
// size and the bound, for the record's reason.
func oversized(req *policies.PermissionRequest) string {
	t := req.Tool
	for _, f := range []struct {
		name  string
		value string
		limit int
	}{
		{"tool call id", t.ID, maxToolWord}, {"kind", t.Kind, maxToolWord}, {"status", t.Status, maxToolWord},
		{"title", t.Title, maxToolText}, {"command", t.Command, maxToolText},
	} {
		if len(f.value) > f.limit {
			return pastBound(f.name, len(f.value), f.limit)
		}
	}
	if len(t.Locations) > maxLocations {
		return fmt.Sprintf("it names %d locations, more than the %d a policy is shown", len(t.Locations), maxLocations)
	}
	for i, l := range t.Locations {
		if len(l.Path) > maxPathBytes {
			return pastBound("locations["+strconv.Itoa(i)+"].path", len(l.Path), maxPathBytes)
		}
	}
	if len(req.Options) > maxOptions {
		return fmt.Sprintf("it offers %d options, more than the %d a policy is shown", len(req.Options), maxOptions)
	}
	for i, o := range req.Options {
		if n := max(len(o.ID), len(o.Kind)); n > maxToolWord {
			return pastBound("options["+strconv.Itoa(i)+"]", n, maxToolWord)
		}
		if len(o.Name) > maxToolText {
			return pastBound("options["+strconv.Itoa(i)+"].name", len(o.Name), maxToolText)
		}
	}
	// What is left unbounded is the raw input: the whole request, as the
	// policy (a WASM module's input) would read it, bounds it.
	b, err := gojson.Marshal(req)
	if err != nil {
		return "it cannot be encoded for the policy: " + err.Error()
	}
	if len(b) > maxRequestBytes {
		return pastBound("request", len(b), maxRequestBytes)
	}
	return ""
}

func pastBound(field string, size, limit int) string {
	return fmt.Sprintf("its %s is %s, more than the %s a policy is shown", field, bytesize.Format(int64(size)), bytesize.Format(int64(limit)))
}

// refusedItself is the record of a request acpflow refuses without asking
// a policy: answered as `reject` is (the agent's reject option, so that it
// may go on without the call; `cancelled` when it offers none), with the
// rule and reason that say why.
func refusedItself(req *policies.PermissionRequest, src policies.Source, rule, reason string) policies.PermissionRecord {
	rec := answeredItself(req, src, rule, reason+": refused without asking the policy")
	rec.Decision = policies.Reject
	rec.Outcome, rec.OptionID = policies.SelectOption(policies.Reject, req.Tool.Kind, req.Options)
	return rec
}

// Bounds on what a record acpflow makes itself keeps of the agent's words:
// a request answered without a policy may be of any size the stream
// allows (10 MiB), and its record goes to results, the run store and the
// terminal.
const (
	maxRecordText      = 1 << 10
	maxRecordLocations = 16
)

// recordText is s as such a record keeps it: at most maxRecordText bytes,
// a cut one saying so.
func recordText(s string) string {
	if len(s) <= maxRecordText {
		return s
	}
	return termtext.Cut(s, maxRecordText) + redact.CutMark + strconv.Itoa(len(s)) + " bytes)"
}

// recordLocations is locs as such a record keeps them: the first
// maxRecordLocations, their paths cut as recordText cuts.
func recordLocations(locs []policies.ToolLocation) []policies.ToolLocation {
	out := make([]policies.ToolLocation, 0, min(len(locs), maxRecordLocations))
	for i, l := range locs {
		if i == maxRecordLocations {
			break
		}
		l.Path = recordText(l.Path)
		out = append(out, l)
	}
	return out
}
