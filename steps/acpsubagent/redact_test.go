package acpsubagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// TestEveryEventThatCarriesTheAgentsWordsIsScrubbed covers each kind of
// event an agent's words reach (class: message chunks, other updates,
// permission and unasked records, questions, warnings, schema retries):
// the secret is gone, the event keeps its type, and an event without one
// is passed as it was.
func TestEveryEventThatCarriesTheAgentsWordsIsScrubbed(t *testing.T) {
	const secret = "sk-event-secret-4821"
	s := newScribe("a", []string{secret}, "/srv/ws")
	rec := policies.PermissionRecord{Title: "curl -H " + secret, Command: "curl " + secret, Reason: "saw " + secret,
		Locations: []policies.ToolLocation{{Path: "/srv/ws/" + secret, InWorkspace: true}}}
	for _, d := range []steps.EventData{
		acpagent.MessageChunk{Text: "the key is " + secret},
		acpagent.AgentUpdate{Kind: "tool_call", Update: map[string]any{"title": "echo " + secret, "n": 1}},
		steps.Permission{PermissionRecord: rec},
		steps.Unasked{PermissionRecord: rec},
		acpagent.Asking{ToolCallID: "c1", Title: "run " + secret},
		steps.Warning{Message: "agent said " + secret},
		acpagent.SchemaRetry{Retry: 1, Retries: 2, Errors: []string{"got " + secret}},
	} {
		t.Run(fmt.Sprintf("%T", d), func(t *testing.T) {
			var sink events
			redactingSink{next: &sink, scribe: s}.Emit(steps.Event{Data: d})
			got := sink.all[0].Data
			if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", d) {
				t.Fatalf("the event became a %T", got)
			}
			b, _ := json.Marshal(got)
			if strings.Contains(string(b), secret) || !strings.Contains(string(b), "[redacted]") {
				t.Errorf("event %s", b)
			}
			if r, ok := got.(steps.Permission); ok && (!r.Locations[0].InWorkspace || rec.Title != "curl -H "+secret) {
				t.Errorf("the record's judgement changed, or the original was written to: %+v", r)
			}
		})
	}
	var sink events
	chunk := acpagent.MessageChunk{Text: "nothing to hide"}
	redactingSink{next: &sink, scribe: s}.Emit(steps.Event{Data: chunk})
	if sink.all[0].Data != chunk {
		t.Errorf("an event without a secret became %v", sink.all[0].Data)
	}
}

// TestAResultIsScrubbedAndItsErrorStillUnwraps covers what a step hands
// to the engine (class: output, final, json, error, stderr, permission
// records).
func TestAResultIsScrubbedAndItsErrorStillUnwraps(t *testing.T) {
	const secret = "sk-result-secret-4821"
	s := newScribe("a", []string{secret}, "/srv/ws")
	res := steps.Result{
		Output: "out " + secret, Final: "final " + secret, Stderr: "stderr " + secret,
		JSON:        map[string]any{"k": []any{"v " + secret}},
		Err:         fmt.Errorf("failed: %w: %s", ErrAbortedBeforeStart, secret),
		Permissions: []policies.PermissionRecord{{Title: "t " + secret, Command: "c " + secret}},
	}
	s.Result(&res)
	b, _ := json.Marshal(map[string]any{"o": res.Output, "f": res.Final, "s": res.Stderr, "j": res.JSON, "e": res.Err.Error(), "p": res.Permissions})
	if strings.Contains(string(b), secret) {
		t.Errorf("the result holds the secret: %s", b)
	}
	if !errors.Is(res.Err, ErrAbortedBeforeStart) || res.Err.Error() != "failed: "+ErrAbortedBeforeStart.Error()+": [redacted]" {
		t.Errorf("error %q does not unwrap to its cause", res.Err)
	}
}
