package policies

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// person is an Asker that answers with a fixed option, or an error, and
// remembers what it was asked.
type person struct {
	mu     sync.Mutex
	answer string
	err    error
	asked  []*Question
	block  bool // wait for ctx to end instead of answering
}

func (p *person) Ask(ctx context.Context, q *Question) (Reply, error) {
	p.mu.Lock()
	p.asked = append(p.asked, q)
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
		return Reply{}, ctx.Err()
	}
	return Reply{OptionID: p.answer, By: ByTerminal}, p.err
}

var askOptions = []Option{
	{ID: "yes", Name: "Allow", Kind: "allow_once"},
	{ID: "always", Name: "Always allow", Kind: "allow_always"},
	{ID: "no", Name: "Reject", Kind: "reject_once"},
}

func askRequest() *PermissionRequest {
	return &PermissionRequest{Tool: Tool{ID: "call_1", Kind: "execute", Title: "rm -rf build", Command: "rm -rf build"}, Options: askOptions}
}

func mustPermission(t *testing.T, spec any) Permission {
	t.Helper()
	p, err := ParsePermission(spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnAskIsAnsweredWithTheOptionAPersonPicks(t *testing.T) {
	pol := mustPermission(t, map[string]any{
		"rules":   []any{map[string]any{"if": `tool.kind == "execute"`, "then": "ask", "reason": "a command"}},
		"default": "allow",
	})
	for _, tc := range []struct {
		pick     string
		decision Decision
	}{{"yes", Allow}, {"always", AllowAlways}, {"no", Reject}} {
		p := &person{answer: tc.pick}
		rec := AnswerAsking(context.Background(), pol, SourceWorkflow, askRequest(), p)
		if rec.Outcome != OutcomeSelected || rec.OptionID != tc.pick || rec.Decision != tc.decision || rec.Ask != "person" {
			t.Errorf("picked %s: record %+v, want %s selected as %s by a person", tc.pick, rec, tc.pick, tc.decision)
		}
		if rec.Rule != "1" || rec.Reason != "a command" {
			t.Errorf("picked %s: rule %q reason %q, want the rule that asked", tc.pick, rec.Rule, rec.Reason)
		}
		if len(p.asked) != 1 || p.asked[0].Request.Tool.Command != "rm -rf build" || p.asked[0].Rule != "1" {
			t.Errorf("the person was asked %+v", p.asked)
		}
	}
	// A request the rules do not ask about is not put to anyone.
	p := &person{answer: "no"}
	read := &PermissionRequest{Tool: Tool{ID: "call_2", Kind: "read"}, Options: askOptions}
	if rec := AnswerAsking(context.Background(), pol, SourceWorkflow, read, p); rec.Decision != Allow || rec.Ask != "" || len(p.asked) != 0 {
		t.Errorf("a read: %+v, asked %d times", rec, len(p.asked))
	}
}

func TestWithNoOneToAskTheFallbackDecides(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     any
		asker    Asker
		decision Decision
		option   string
	}{
		{"the shorthand, no asker: reject", "ask", nil, Reject, "no"},
		{"an ask-fallback of allow", map[string]any{"default": "ask", "ask-fallback": "allow"}, nil, Allow, "yes"},
		{"an asker with no terminal", map[string]any{"default": "ask", "ask-fallback": "allow"}, &person{err: ErrNoOneToAsk}, Allow, "yes"},
		{"a fallback with no option of its kind", map[string]any{"default": "ask", "ask-fallback": "reject_always"}, nil, RejectAlways, "no"},
		{"cancel", map[string]any{"default": "ask", "ask-fallback": "cancel"}, nil, Cancel, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := AnswerAsking(context.Background(), mustPermission(t, tc.spec), SourceWorkflow, askRequest(), tc.asker)
			if rec.Decision != tc.decision || rec.OptionID != tc.option || rec.Ask != "fallback" {
				t.Errorf("record %+v, want %s (%q) by the fallback", rec, tc.decision, tc.option)
			}
			if !strings.Contains(rec.Reason, "no one to ask: ask-fallback "+string(tc.decision)) {
				t.Errorf("reason %q does not say the fallback decided", rec.Reason)
			}
		})
	}
	// Answer has no one to ask.
	if rec := Answer(context.Background(), Shorthand{Decision: Ask}, SourceWorkflow, askRequest()); rec.Decision != Reject || rec.Ask != "fallback" {
		t.Errorf("Answer on ask: %+v", rec)
	}
}

func TestAnAskThatOutlivesItsTurnIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &person{block: true}
	done := make(chan PermissionRecord)
	go func() { done <- AnswerAsking(ctx, Shorthand{Decision: Ask}, SourceWorkflow, askRequest(), p) }()
	cancel()
	rec := <-done
	if rec.Outcome != OutcomeCancelled || rec.Decision != Cancel || rec.Ask != "unanswered" || !strings.Contains(rec.Reason, "the turn ended") {
		t.Errorf("record %+v, want cancelled, unanswered", rec)
	}
}

func TestAnAnswerThatIsNoOptionFallsBackAndSaysSo(t *testing.T) {
	for _, p := range []*person{{answer: "maybe"}, {err: errors.New("the terminal broke")}} {
		rec := AnswerAsking(context.Background(), Shorthand{Decision: Ask}, SourceWorkflow, askRequest(), p)
		if rec.Decision != Reject || rec.Ask != "fallback" || !strings.Contains(rec.Reason, "asking failed") {
			t.Errorf("record %+v, want the fallback, saying asking failed", rec)
		}
	}
}

func TestAskFallbackIsParsedStrictly(t *testing.T) {
	for spec, want := range map[string]map[string]any{
		"ask-fallback: want one of allow, allow_always, reject, reject_always, cancel; got \"ask\"":  {"default": "ask", "ask-fallback": "ask"},
		"ask-fallback: want one of allow, allow_always, reject, reject_always, cancel; got \"alow\"": {"default": "ask", "ask-fallback": "alow"},
	} {
		_, err := ParsePermission(want, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), spec) {
			t.Errorf("%v: err = %v, want %q", want, err, spec)
		}
	}
}

func TestAnOuterAskIsFinalWhateverThePersonOrItsFallbackSays(t *testing.T) {
	outer := Outer{{File: "/etc/acpflow/policy.yaml", Permission: mustPermission(t, map[string]any{"default": "ask", "ask-fallback": "cancel"})}}
	workflow := Shorthand{Decision: Allow}
	// A person picks reject: the workflow's allow is not asked.
	rec := outer.AnswerAsking(context.Background(), workflow, SourceWorkflow, askRequest(), &person{answer: "no"})
	if rec.Decision != Reject || rec.Ask != "person" || rec.Layer != LayerOuter || rec.Policy != "/etc/acpflow/policy.yaml" {
		t.Errorf("the person's reject: %+v, want it final, layer outer", rec)
	}
	// With no one to ask, the outer file's fallback decides, and is final.
	rec = outer.Answer(context.Background(), workflow, SourceWorkflow, askRequest())
	if rec.Decision != Cancel || rec.Ask != "fallback" || rec.Layer != LayerOuter {
		t.Errorf("no one to ask: %+v, want the outer file's cancel", rec)
	}
	// A workflow's ask under an outer allow is the workflow's to put.
	allow := Outer{{File: "/etc/acpflow/policy.yaml", Permission: Shorthand{Decision: Allow}}}
	rec = allow.AnswerAsking(context.Background(), Shorthand{Decision: Ask}, SourceWorkflow, askRequest(), &person{answer: "yes"})
	if rec.Decision != Allow || rec.Ask != "person" || rec.Layer != LayerWorkflow {
		t.Errorf("a workflow's ask: %+v, want the person's allow, layer workflow", rec)
	}
}

// An ask waits its ask-timeout for an answer, then the fallback decides
// and the reason says why; an answer given as a decision (the web UI's,
// acpflow approve's) selects the option that decision would.
func TestAnAskWaitsItsTimeoutAndTakesADecisionAsAnAnswer(t *testing.T) {
	pol := mustPermission(t, map[string]any{"default": "ask", "ask-fallback": "allow", "ask-timeout": "50ms"})
	p := &person{block: true}
	rec := AnswerAsking(context.Background(), pol, SourceWorkflow, askRequest(), p)
	if rec.Decision != Allow || rec.OptionID != "yes" || rec.Ask != "fallback" || !strings.Contains(rec.Reason, "no answer within the ask-timeout (50ms): ask-fallback allow") {
		t.Errorf("record %+v, want the fallback after the ask-timeout", rec)
	}
	if len(p.asked) != 1 || p.asked[0].Timeout != 50*time.Millisecond || p.asked[0].Fallback != Allow {
		t.Errorf("asked %+v, want the question to carry its timeout and fallback", p.asked)
	}
	at := time.Now()
	d := decider{Reply{Decision: Reject, By: ByUI, At: at, Approval: "ap-1"}}
	rec = AnswerAsking(context.Background(), pol, SourceWorkflow, askRequest(), d)
	if rec.Decision != Reject || rec.OptionID != "no" || rec.Ask != "person" || rec.AnsweredBy != ByUI || rec.Approval != "ap-1" || rec.AnsweredAt == "" {
		t.Errorf("record %+v, want reject-once answered in the UI under ap-1", rec)
	}
	d.r.Grant = true
	if rec = AnswerAsking(context.Background(), pol, SourceWorkflow, askRequest(), d); rec.Ask != "grant" {
		t.Errorf("a grant's record %+v, want ask grant", rec)
	}
	if _, err := ParsePermission(map[string]any{"default": "ask", "ask-timeout": "0s"}, t.TempDir()); err == nil {
		t.Error("an ask-timeout of 0 was taken")
	}
}

// decider answers with a fixed Reply.
type decider struct{ r Reply }

func (d decider) Ask(context.Context, *Question) (Reply, error) { return d.r, nil }
