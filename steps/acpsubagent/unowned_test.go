package acpsubagent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// runPermissions are the permission events without a step: the run's.
func (e *events) runPermissions() []policies.PermissionRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []policies.PermissionRecord
	for _, ev := range e.all {
		if p, ok := ev.Data.(steps.Permission); ok && ev.Step == "" {
			out = append(out, p.PermissionRecord)
		}
	}
	return out
}

// A request acpflow answers without a policy is in the step's records, or
// the run's when the step's turn is over, never nowhere. The class of
// input: a request whose session no turn's client owns, on one step's
// process: a session the agent never opened (during the turn), the one
// about to be opened (before session/new answers), and the step's own
// after its turn (at teardown's session/close, after stdin's EOF).
func TestARequestNoTurnOwnsIsRecordedWithItsReason(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     []string
		rule      string
		runs      bool   // the run's record, not the step's
		reason    string // part of it
		toolCall  string
		wantTools int // the step's records
	}{
		{"a session the agent never had", []string{"-permission", "execute:make", "-permission-session", "nobody's"},
			"other-session", false, `request for session "nobody's", which is not the step's`, "call_1", 1},
		{"before session/new answered", []string{"-stray-permission", "session/new"},
			"session-not-open", false, "before the step's own session was open", "stray_session/new", 1},
		{"at teardown's session/close", []string{"-capabilities", `{"sessionCapabilities":{"close":{}}}`, "-stray-permission", "session/close"},
			"turn-ended", true, "request for the session of step s1", "stray_session/close", 0},
		{"after stdin's EOF", []string{"-stray-permission", "eof"},
			"turn-ended", true, "after its turn ended", "stray_eof", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.flags...)
			h.perm = policies.Shorthand{Decision: policies.Allow}
			res := h.run(context.Background())
			if res.StopReason != steps.Completed {
				t.Fatalf("stop %s: %v", res.StopReason, res.Err)
			}
			var rec *policies.PermissionRecord
			list := res.Permissions
			if tc.runs {
				list = h.events.runPermissions()
			}
			if len(res.Permissions) != tc.wantTools {
				t.Errorf("the step recorded %+v", res.Permissions)
			}
			for i := range list {
				if list[i].ToolCallID == tc.toolCall {
					rec = &list[i]
				}
			}
			if rec == nil {
				t.Fatalf("no record of %s; step %+v, run %+v", tc.toolCall, res.Permissions, h.events.runPermissions())
			}
			if rec.Rule != tc.rule || rec.Outcome != policies.OutcomeCancelled || rec.Decision != policies.Cancel || !strings.Contains(rec.Reason, tc.reason) {
				t.Errorf("record %+v, want rule %s, cancelled, reason with %q", rec, tc.rule, tc.reason)
			}
			// (After EOF no answer can reach the agent.)
			for _, a := range h.recorded("permission_answer") {
				if a["tool_call_id"] == tc.toolCall && !strings.Contains(fmt.Sprint(a["result"]), "outcome:cancelled") {
					t.Errorf("the agent was answered %v", a)
				}
			}
		})
	}
}

// Options an answer by id cannot tell apart are answered `cancelled`, and
// the record says so, whatever the policy decides; the agent receives no
// option id. The class of input: a permission request whose options share
// an id across kinds (allow_once and reject_once, allow_always and
// reject_always), or within one kind under two names, or lack an id; under
// allow, reject and ask (its fallback). An exact repeat is answered.
func TestAmbiguousOptionsFromAnAgentAreAnsweredCancelled(t *testing.T) {
	request := func(options string) string {
		return `{"toolCall": {"toolCallId": "call_x", "kind": "execute", "title": "make", "rawInput": {"command": "make"}}, "options": ` + options + `}`
	}
	sets := []struct{ name, options, why string }{
		{"allow_once and reject_once share an id",
			`[{"optionId": "x", "name": "Allow", "kind": "allow_once"}, {"optionId": "x", "name": "Reject", "kind": "reject_once"}]`,
			`id "x" names two options, allow_once "Allow" and reject_once "Reject"`},
		{"allow_always and reject_always share an id",
			`[{"optionId": "a", "name": "Allow", "kind": "allow_once"}, {"optionId": "r", "name": "Reject", "kind": "reject_once"}, {"optionId": "y", "name": "Always", "kind": "allow_always"}, {"optionId": "y", "name": "Never", "kind": "reject_always"}]`,
			`id "y" names two options`},
		{"two allow_once options under one id",
			`[{"optionId": "a", "name": "Allow", "kind": "allow_once"}, {"optionId": "a", "name": "Allow all edits during this session", "kind": "allow_once"}, {"optionId": "r", "name": "Reject", "kind": "reject_once"}]`,
			`id "a" names two options`},
		{"an empty optionId",
			`[{"optionId": "a", "name": "Allow", "kind": "allow_once"}, {"optionId": "", "name": "Reject", "kind": "reject_once"}]`,
			`the reject_once option "Reject" has no id`},
	}
	policiesByName := map[string]policies.Permission{
		"allow":                policies.Shorthand{Decision: policies.Allow},
		"reject":               policies.Shorthand{Decision: policies.Reject},
		"ask, fallback allow":  askPolicy(t, "allow"),
		"ask, fallback reject": askPolicy(t, "reject"),
	}
	for _, set := range sets {
		for name, pol := range policiesByName {
			t.Run(set.name+"/"+name, func(t *testing.T) {
				h := newHarness(t, "-permission-json", request(set.options))
				h.perm = pol
				res := h.run(context.Background())
				if len(res.Permissions) != 1 {
					t.Fatalf("records %+v, want one", res.Permissions)
				}
				rec := res.Permissions[0]
				if rec.Outcome != policies.OutcomeCancelled || rec.OptionID != "" || !strings.Contains(rec.Reason, "ambiguous options: "+set.why) {
					t.Errorf("record %+v, want cancelled saying %q", rec, set.why)
				}
				answers := h.recorded("permission_answer")
				if len(answers) != 1 || !strings.Contains(fmt.Sprint(answers[0]["result"]), "outcome:cancelled") {
					t.Errorf("the agent was answered %v, want cancelled", answers)
				}
			})
		}
	}
	t.Run("an exact repeat is one option", func(t *testing.T) {
		h := newHarness(t, "-permission-json", request(`[{"optionId": "a", "name": "Allow", "kind": "allow_once"}, {"optionId": "a", "name": "Allow", "kind": "allow_once"}, {"optionId": "r", "name": "Reject", "kind": "reject_once"}]`))
		h.perm = policies.Shorthand{Decision: policies.Allow}
		res := h.run(context.Background())
		if len(res.Permissions) != 1 || res.Permissions[0].OptionID != "a" || res.Permissions[0].Outcome != policies.OutcomeSelected {
			t.Errorf("records %+v, want a selected", res.Permissions)
		}
	})
}

func askPolicy(t *testing.T, fallback string) policies.Permission {
	t.Helper()
	p, err := policies.ParsePermission(map[string]any{"default": "ask", "ask-fallback": fallback}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// What a process remembers of its sessions stays bounded however many
// steps a pooled agent serves, and a session kept for two chained steps is
// kept until both let go. The class of input: more sessions than the
// bound; keeps and releases of one session interleaved.
func TestTheSessionBookIsBounded(t *testing.T) {
	var b sessionBook
	c := &client{inv: &steps.Invocation{RunID: "r", StepID: "s"}}
	for i := range maxBookedSessions + 10 {
		b.routed(acp.SessionId(fmt.Sprint(i)), c)
	}
	if len(b.steps) != maxBookedSessions || len(b.order) != maxBookedSessions {
		t.Errorf("%d sessions booked (%d in order), want %d", len(b.steps), len(b.order), maxBookedSessions)
	}
	if _, _, ok := b.sessionOf("0"); ok {
		t.Errorf("the oldest session is still booked")
	}
	if of, _, ok := b.sessionOf(acp.SessionId(fmt.Sprint(maxBookedSessions + 9))); !ok || of.step != "s" {
		t.Errorf("the newest session: %v %v", of, ok)
	}

	b.keep("k")
	b.keep("k")
	b.unkeep("k")
	if _, kept, _ := b.sessionOf("k"); !kept {
		t.Errorf("released once of twice, the session is no longer kept")
	}
	b.unkeep("k")
	b.unkeep("never kept")
	if _, kept, _ := b.sessionOf("k"); kept || len(b.kept) != 0 {
		t.Errorf("released twice, the session is still kept: %v", b.kept)
	}
}

// An agent's session id is kept in the result and the run store and
// routed by: one longer than maxSessionID fails the step with a clear
// error, and the agent is gone. The class of input: the length of the id
// session/new answers, at the bound, just past it, and far past it (as
// long as one argument of the scripted agent may be).
func TestASessionIDPastTheBoundFailsTheStep(t *testing.T) {
	for _, n := range []int{maxSessionID, maxSessionID + 1, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id := strings.Repeat("s", n)
			res := newHarness(t, "-session-id", id).run(context.Background())
			if n <= maxSessionID {
				if res.Err != nil || res.SessionID != id {
					t.Errorf("err = %v, session id of %d bytes", res.Err, len(res.SessionID))
				}
				return
			}
			want := fmt.Sprintf("agent test answered session/new with a session id of %d bytes, more than the %d acpflow keeps: this step fails", n, maxSessionID)
			if res.Err == nil || res.Err.Error() != want {
				t.Errorf("err = %v, want %q", res.Err, want)
			}
			if res.SessionID != "" {
				t.Errorf("session id of %d bytes kept in the result", len(res.SessionID))
			}
		})
	}
}

// A session id in a reason or an error is on one line, quoted, and
// bounded, a cut one saying so. The class of input: the id an agent
// sends, plain, with a line break and a bidi override, with a quote, and
// longer than the bound.
func TestAQuotedSessionIDStaysOnItsLine(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"sess-1", `"sess-1"`},
		{"a\nb\u202ec", `"a\nb\u202ec"`},
		{`say "hi"`, `"say \"hi\""`},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 80) + `"… (cut from 100 bytes)`},
	} {
		if got := quotedSession(acp.SessionId(tc.id)); got != tc.want {
			t.Errorf("quotedSession(%q) = %s, want %s", tc.id, got, tc.want)
		}
	}
}
