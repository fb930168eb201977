package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func opt(id, kind string) Option { return Option{ID: id, Name: id, Kind: kind} }

// every offers each kind twice, in an order that puts the less preferred kind
// first, so a test can tell preference from list order.
var every = []Option{
	opt("aa1", "allow_always"), opt("ao1", "allow_once"),
	opt("ra1", "reject_always"), opt("ro1", "reject_once"),
	opt("aa2", "allow_always"), opt("ao2", "allow_once"),
	opt("ra2", "reject_always"), opt("ro2", "reject_once"),
}

func TestSelectOption(t *testing.T) {
	tests := []struct {
		name        string
		decision    Decision
		options     []Option
		wantOutcome string
		wantID      string
	}{
		{"allow selects the first allow_once even when allow_always comes first", Allow, every, "selected", "ao1"},
		{"allow never falls back to an allow_always option", Allow, []Option{opt("r", "reject_once"), opt("aa1", "allow_always"), opt("aa2", "allow_always")}, "cancelled", ""},
		{"allow_always selects the first allow_always", AllowAlways, every, "selected", "aa1"},
		{"allow_always falls back to the first allow_once", AllowAlways, []Option{opt("ro", "reject_once"), opt("ao1", "allow_once"), opt("ao2", "allow_once")}, "selected", "ao1"},
		{"reject selects the first reject_once even when reject_always comes first", Reject, every, "selected", "ro1"},
		{"reject falls back to the first reject_always", Reject, []Option{opt("ao", "allow_once"), opt("ra1", "reject_always")}, "selected", "ra1"},
		{"reject_always selects the first reject_always", RejectAlways, every, "selected", "ra1"},
		{"reject_always falls back to the first reject_once", RejectAlways, []Option{opt("ao", "allow_once"), opt("ro1", "reject_once")}, "selected", "ro1"},
		{"cancel answers cancelled whatever is offered", Cancel, every, "cancelled", ""},
		{"allow with only reject options answers cancelled", Allow, []Option{opt("ro", "reject_once"), opt("ra", "reject_always")}, "cancelled", ""},
		{"reject with only allow options answers cancelled", Reject, []Option{opt("ao", "allow_once"), opt("aa", "allow_always")}, "cancelled", ""},
		{"reject with no options at all answers cancelled", Reject, nil, "cancelled", ""},
		{"an option of an unknown kind is never selected", Allow, []Option{opt("x", "allow"), opt("y", "ALLOW_ONCE")}, "cancelled", ""},
		{"an unknown decision answers cancelled", Decision("yes"), every, "cancelled", ""},
		{"an empty decision answers cancelled", "", every, "cancelled", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcome, id := SelectOption(tt.decision, "execute", tt.options)
			if outcome != tt.wantOutcome || id != tt.wantID {
				t.Errorf("SelectOption(%q) = %q, %q; want %q, %q", tt.decision, outcome, id, tt.wantOutcome, tt.wantID)
			}
		})
	}
}

func TestParseDecision(t *testing.T) {
	for _, s := range []string{"allow", "allow_always", "reject", "reject_always", "cancel"} {
		t.Run(s+" is a decision", func(t *testing.T) {
			d, err := ParseDecision(s)
			if err != nil || string(d) != s || !d.Valid() {
				t.Errorf("ParseDecision(%q) = %q, %v", s, d, err)
			}
		})
	}
	for _, s := range []string{"", "Allow", "deny", "allow-always", " reject"} {
		t.Run(fmt.Sprintf("%q is refused with the list of decisions", s), func(t *testing.T) {
			d, err := ParseDecision(s)
			if err == nil || d != "" || Decision(s).Valid() {
				t.Fatalf("ParseDecision(%q) = %q, %v; want an error", s, d, err)
			}
			if !strings.Contains(err.Error(), "allow_always") {
				t.Errorf("error %q does not list the decisions", err)
			}
		})
	}
	for typo, want := range map[string]string{"rejct": "reject", "Allow": "allow", "allow-always": "allow_always", "canel": "cancel"} {
		t.Run(fmt.Sprintf("%q suggests %q", typo, want), func(t *testing.T) {
			_, err := ParseDecision(typo)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("did you mean %q?", want)) {
				t.Errorf("ParseDecision(%q) = %v; want a did-you-mean %q", typo, err, want)
			}
		})
	}
	if _, err := ParseDecision("maybe"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a word like no decision gets a suggestion: %v", err)
	}
}

func TestParseShorthand(t *testing.T) {
	for _, s := range []string{"reject", "reject_always", "allow", "allow_always", "cancel"} {
		t.Run(s+" is accepted and decides "+s+" under the rule shorthand", func(t *testing.T) {
			sh, err := ParseShorthand(s)
			if err != nil {
				t.Fatal(err)
			}
			v, err := sh.DecidePermission(context.Background(), &PermissionRequest{})
			if err != nil || v != (Verdict{Decision: Decision(s), Rule: "shorthand"}) {
				t.Errorf("verdict = %+v, %v", v, err)
			}
		})
	}
	for _, s := range []string{"Reject", "deny", "", "allow ", "always"} {
		t.Run(fmt.Sprintf("%q is refused with the accepted words", s), func(t *testing.T) {
			_, err := ParseShorthand(s)
			if err == nil {
				t.Fatalf("ParseShorthand(%q) accepted", s)
			}
			for _, w := range decisionWords {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDefaultPermissionRejects(t *testing.T) {
	v, err := DefaultPermission().DecidePermission(context.Background(), &PermissionRequest{})
	if err != nil || v.Decision != Reject || v.Rule != "shorthand" {
		t.Errorf("default verdict = %+v, %v; want reject by shorthand", v, err)
	}
}

// policyFunc adapts a function to Permission for tests.
type policyFunc func(context.Context, *PermissionRequest) (Verdict, error)

func (f policyFunc) DecidePermission(ctx context.Context, req *PermissionRequest) (Verdict, error) {
	return f(ctx, req)
}

func answers(v Verdict, err error) Permission {
	return policyFunc(func(context.Context, *PermissionRequest) (Verdict, error) { return v, err })
}

func TestAnswer(t *testing.T) {
	offered := []Option{opt("a1", "allow_once"), opt("r1", "reject_once")}
	allowOnly := []Option{opt("a1", "allow_once"), opt("a2", "allow_always")}
	tests := []struct {
		name    string
		policy  Permission
		options []Option
		want    PermissionRecord // ToolCallID, Kind, Title and Policy are checked separately
	}{
		{
			name:    "an allow verdict selects the allow option and keeps the rule and reason",
			policy:  answers(Verdict{Decision: Allow, Rule: "1", Reason: "reads are fine"}, nil),
			options: offered,
			want:    PermissionRecord{Decision: Allow, Outcome: "selected", OptionID: "a1", Rule: "1", Reason: "reads are fine"},
		},
		{
			name:    "a reject verdict selects the reject option with an empty reason",
			policy:  answers(Verdict{Decision: Reject, Rule: "default"}, nil),
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Rule: "default"},
		},
		{
			name:    "a cancel verdict answers cancelled without a no-matching-option reason",
			policy:  answers(Verdict{Decision: Cancel, Rule: "shorthand"}, nil),
			options: offered,
			want:    PermissionRecord{Decision: Cancel, Outcome: "cancelled", Rule: "shorthand"},
		},
		{
			name:    "a verdict whose family is not offered answers cancelled with reason no matching option",
			policy:  answers(Verdict{Decision: Reject, Rule: "2"}, nil),
			options: allowOnly,
			want:    PermissionRecord{Decision: Reject, Outcome: "cancelled", Rule: "2", Reason: "no matching option"},
		},
		{
			name:    "a verdict whose family is not offered keeps the policy's own reason",
			policy:  answers(Verdict{Decision: Reject, Rule: "2", Reason: "destructive command"}, nil),
			options: allowOnly,
			want:    PermissionRecord{Decision: Reject, Outcome: "cancelled", Rule: "2", Reason: "destructive command"},
		},
		{
			name:    "a policy error fails closed by selecting the reject option",
			policy:  answers(Verdict{Decision: Allow, Rule: "m.wasm", Reason: "ignored"}, errors.New("module trapped")),
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Rule: "m.wasm", Reason: "policy error: module trapped"},
		},
		{
			name:    "a policy error with no reject option offered answers cancelled and keeps the error as reason",
			policy:  answers(Verdict{}, errors.New("timed out")),
			options: allowOnly,
			want:    PermissionRecord{Decision: Reject, Outcome: "cancelled", Reason: "policy error: timed out"},
		},
		{
			name:    "an invalid decision fails closed and names the decision",
			policy:  answers(Verdict{Decision: "yes", Rule: "3", Reason: "sure"}, nil),
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Rule: "3", Reason: `policy answered an invalid decision "yes"`},
		},
		{
			name:    "an empty decision fails closed",
			policy:  answers(Verdict{}, nil),
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Reason: `policy answered an invalid decision ""`},
		},
		{
			name: "a panicking policy fails closed and the reason mentions the panic",
			policy: policyFunc(func(context.Context, *PermissionRequest) (Verdict, error) {
				panic("index out of range")
			}),
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Reason: "policy error: panic: index out of range"},
		},
		{
			name:    "a missing policy fails closed",
			policy:  nil,
			options: offered,
			want:    PermissionRecord{Decision: Reject, Outcome: "selected", OptionID: "r1", Reason: "policy error: no permission policy"},
		},
		{
			name:    "an allow verdict with only allow_always offered answers cancelled with reason no matching option",
			policy:  Shorthand{Decision: Allow},
			options: []Option{opt("a2", "allow_always"), opt("r1", "reject_once")},
			want:    PermissionRecord{Decision: Allow, Outcome: "cancelled", Rule: "shorthand", Reason: "no matching option"},
		},
		{
			name:    "an allow_always verdict selects allow_always",
			policy:  Shorthand{Decision: AllowAlways},
			options: []Option{opt("a1", "allow_once"), opt("a2", "allow_always")},
			want:    PermissionRecord{Decision: AllowAlways, Outcome: "selected", OptionID: "a2", Rule: "shorthand"},
		},
		{
			name:    "an allow_always verdict falls back to allow_once",
			policy:  Shorthand{Decision: AllowAlways},
			options: offered,
			want:    PermissionRecord{Decision: AllowAlways, Outcome: "selected", OptionID: "a1", Rule: "shorthand"},
		},
		{
			name:    "the shorthand allow selects allow_once",
			policy:  Shorthand{Decision: Allow},
			options: []Option{opt("a2", "allow_always"), opt("a1", "allow_once")},
			want:    PermissionRecord{Decision: Allow, Outcome: "selected", OptionID: "a1", Rule: "shorthand"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			locations := []ToolLocation{{Path: "/ws/build", InWorkspace: true}}
			req := &PermissionRequest{
				Tool:    Tool{ID: "call_1", Kind: "execute", Title: "Run rm -rf build", Command: "rm -rf build", Locations: locations},
				Options: tt.options,
			}
			got := Answer(context.Background(), tt.policy, SourceStep, req)
			want := tt.want
			want.ToolCallID, want.Kind, want.Title, want.Policy, want.Layer = "call_1", "execute", "Run rm -rf build", SourceStep, LayerWorkflow
			want.Command, want.Locations = "rm -rf build", locations
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Answer() =\n  %+v\nwant\n  %+v", got, want)
			}
		})
	}
}

func TestAnswerPassesTheRequestAndContextToThePolicy(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	req := &PermissionRequest{Tool: Tool{ID: "c"}, Options: []Option{opt("a", "allow_once")}}
	var gotReq *PermissionRequest
	var gotCtx context.Context
	p := policyFunc(func(ctx context.Context, r *PermissionRequest) (Verdict, error) {
		gotCtx, gotReq = ctx, r
		return Verdict{Decision: Allow}, nil
	})
	Answer(ctx, p, SourceWorkflow, req)
	if gotReq != req || gotCtx.Value(key{}) != "v" {
		t.Errorf("policy saw request %p and context %v; want %p and the caller's context", gotReq, gotCtx, req)
	}
}

func TestAnswerWithoutARequestFailsSafe(t *testing.T) {
	rec := Answer(context.Background(), Shorthand{Decision: Allow}, SourceDefault, nil)
	if rec.Outcome != "cancelled" || rec.Reason != "no matching option" || rec.Policy != SourceDefault {
		t.Errorf("Answer(nil request) = %+v", rec)
	}
}

func TestAnswerRecordsWhatThePolicySaw(t *testing.T) {
	req := &PermissionRequest{Tool: Tool{ID: "c", Kind: "edit", Locations: []ToolLocation{{Path: "/ws/a", Line: 3, InWorkspace: true}}}}
	rec := Answer(context.Background(), Shorthand{Decision: Reject}, SourceStep, req)
	req.Tool.Locations[0].Path = "/changed"
	if rec.Locations[0].Path != "/ws/a" {
		t.Errorf("the record shares the request's locations: %+v", rec.Locations)
	}
	t.Run("a request without locations is recorded with an empty list, not null", func(t *testing.T) {
		rec := Answer(context.Background(), Shorthand{Decision: Reject}, SourceStep, &PermissionRequest{Tool: Tool{Command: "ls"}})
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"command":"ls","locations":[]`) {
			t.Errorf("record JSON %s lacks the command and an empty locations list", b)
		}
	})
}

// Options that grant more than the one call, as today's adapters offer
// them (claude-agent-acp 0.101: Write's "allow all edits during this
// session", ExitPlanMode's auto and bypass exits), are never selected by
// an allow decision: the class is "an option whose id or name says it
// switches the mode or stops asking, and any always option of a
// switch_mode call".
func TestAllowNeverSelectsAnOptionThatWidensTheSession(t *testing.T) {
	write := []Option{
		{ID: "allow-with-updates", Name: "Yes, allow all edits during this session", Kind: "allow_always"},
		{ID: "allow", Name: "Yes", Kind: "allow_once"},
		{ID: "reject", Name: "No", Kind: "reject_once"},
	}
	exitPlan := []Option{
		{ID: "exit-plan-auto", Name: "Yes, and use auto mode", Kind: "allow_always"},
		{ID: "exit-plan-bypass", Name: "Yes, and bypass permissions", Kind: "allow_always"},
		{ID: "exit-plan-default", Name: "Yes, and manually approve edits", Kind: "allow_once"},
		{ID: "plan", Name: "No, keep planning", Kind: "reject_once"},
	}
	onlyWidening := []Option{
		{ID: "yolo", Name: "Allow everything", Kind: "allow_always"},
		{ID: "no", Name: "No", Kind: "reject_once"},
	}
	codex := []Option{
		{ID: "approved-for-session", Name: "Always", Kind: "allow_always"},
		{ID: "approved", Name: "Yes", Kind: "allow_once"},
		{ID: "cancel", Name: "No", Kind: "reject_once"},
	}
	for _, tt := range []struct {
		name     string
		decision Decision
		toolKind string
		options  []Option
		want     string // option id, "" for cancelled
	}{
		{"allow_always on a write skips 'all edits during this session'", AllowAlways, "edit", write, "allow"},
		{"allow on a write selects the once option", Allow, "edit", write, "allow"},
		{"allow_always on ExitPlanMode exits to the manual mode", AllowAlways, "switch_mode", exitPlan, "exit-plan-default"},
		{"allow on ExitPlanMode exits to the manual mode", Allow, "switch_mode", exitPlan, "exit-plan-default"},
		{"reject on ExitPlanMode keeps planning", Reject, "switch_mode", exitPlan, "plan"},
		{"an allow with only a widening option is cancelled", AllowAlways, "execute", onlyWidening, ""},
		{"an always option that names no widening is kept for allow_always", AllowAlways, "execute", codex, "approved-for-session"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			outcome, id := SelectOption(tt.decision, tt.toolKind, tt.options)
			if id != tt.want || (tt.want == "") != (outcome == OutcomeCancelled) {
				t.Errorf("SelectOption(%s, %s) = %s %q, want %q", tt.decision, tt.toolKind, outcome, id, tt.want)
			}
		})
	}
}

// Options that an answer by id cannot tell apart are answered `cancelled`
// whatever decides, and the record says why. The class of input: an
// option set in which one id names two options that differ in kind or in
// name (allow and reject, once and always, two allow_once options named
// differently), or an option has no id; for every way a decision is made
// (each shorthand decision, a rule, ask with its fallback, ask with a
// person, an outer cap). An exact repeat of one option is not ambiguous.
func TestAmbiguousOptionsAreAnsweredCancelled(t *testing.T) {
	named := func(id, name, kind string) Option { return Option{ID: id, Name: name, Kind: kind} }
	sets := []struct {
		name    string
		options []Option
		why     string
	}{
		{"allow_once and reject_once share an id",
			[]Option{named("x", "Allow", "allow_once"), named("x", "Reject", "reject_once")},
			`id "x" names two options, allow_once "Allow" and reject_once "Reject"`},
		{"reject_once comes first and shares its id with allow_once",
			[]Option{named("x", "Reject", "reject_once"), named("a", "Always", "allow_always"), named("x", "Allow", "allow_once")},
			`id "x" names two options, reject_once "Reject" and allow_once "Allow"`},
		{"allow_always and reject_always share an id",
			[]Option{named("a1", "Allow", "allow_once"), named("r1", "Reject", "reject_once"), named("y", "Always allow", "allow_always"), named("y", "Always reject", "reject_always")},
			`id "y" names two options, allow_always "Always allow" and reject_always "Always reject"`},
		{"allow_once and allow_always share an id",
			[]Option{named("a", "Allow", "allow_once"), named("a", "Always allow", "allow_always"), named("r", "Reject", "reject_once")},
			`id "a" names two options, allow_once "Allow" and allow_always "Always allow"`},
		{"two allow_once options with one id and different names",
			[]Option{named("a", "Allow", "allow_once"), named("a", "Allow all edits during this session", "allow_once"), named("r", "Reject", "reject_once")},
			`id "a" names two options, allow_once "Allow" and allow_once "Allow all edits during this session"`},
		{"an option of an unknown kind shares an id with a reject",
			[]Option{named("a", "Allow", "allow_once"), named("r", "Reject", "reject_once"), named("r", "Sure", "yes_please")},
			`id "r" names two options, reject_once "Reject" and "yes_please" "Sure"`},
		{"an option has an empty id",
			[]Option{named("a", "Allow", "allow_once"), named("", "Reject", "reject_once")},
			`the reject_once option "Reject" has no id`},
		{"every option has an empty id",
			[]Option{named("", "Allow", "allow_once"), named("", "Reject", "reject_once")},
			`the allow_once option "Allow" has no id`},
	}
	forms := []struct {
		name  string
		spec  any
		asker Asker
		outer Outer
		ask   string // the record's ask
	}{
		{"shorthand allow", "allow", nil, nil, ""},
		{"shorthand allow_always", "allow_always", nil, nil, ""},
		{"shorthand reject", "reject", nil, nil, ""},
		{"shorthand reject_always", "reject_always", nil, nil, ""},
		{"a rule that allows", map[string]any{"rules": []any{map[string]any{"if": `tool.kind == "execute"`, "then": "allow", "reason": "builds are fine"}}}, nil, nil, ""},
		{"ask with no one to ask: fallback reject", "ask", nil, nil, "fallback"},
		{"ask with no one to ask: fallback allow", map[string]any{"default": "ask", "ask-fallback": "allow"}, nil, nil, "fallback"},
		{"ask with a person who would pick the shared id", map[string]any{"default": "ask", "ask-fallback": "allow"}, &person{answer: "x"}, nil, "fallback"},
		{"allow_always under an outer allow", "allow_always", nil, Outer{{File: "/etc/acpflow/policy.yaml", Permission: Shorthand{Decision: Allow}}}, ""},
	}
	for _, set := range sets {
		for _, form := range forms {
			t.Run(set.name+"/"+form.name, func(t *testing.T) {
				req := &PermissionRequest{Tool: Tool{ID: "call_1", Kind: "execute", Title: "make", Command: "make"}, Options: set.options}
				rec := form.outer.AnswerAsking(context.Background(), mustPermission(t, form.spec), SourceWorkflow, req, form.asker)
				if rec.Outcome != OutcomeCancelled || rec.OptionID != "" {
					t.Errorf("answered %s %q, want cancelled", rec.Outcome, rec.OptionID)
				}
				if !strings.Contains(rec.Reason, "ambiguous options: "+set.why) {
					t.Errorf("reason %q does not say %q", rec.Reason, set.why)
				}
				if strings.Contains(rec.Reason, reasonNoOption) {
					t.Errorf("reason %q also says %q: the options were there, but ambiguous", rec.Reason, reasonNoOption)
				}
				if rec.Ask != form.ask || rec.Decision == Ask || !rec.Decision.Valid() {
					t.Errorf("record %+v: want ask %q and a decision a record can hold", rec, form.ask)
				}
				if p, ok := form.asker.(*person); ok && len(p.asked) > 0 {
					t.Errorf("a person was asked about ambiguous options: %v", p.asked)
				}
			})
		}
	}

	t.Run("an option repeated exactly is answered as usual", func(t *testing.T) {
		options := []Option{named("a", "Allow", "allow_once"), named("a", "Allow", "allow_once"), named("r", "Reject", "reject_once")}
		if why := Ambiguous(options); why != "" {
			t.Fatalf("Ambiguous = %q, want none", why)
		}
		for d, want := range map[Decision]string{Allow: "a", Reject: "r"} {
			if outcome, id := SelectOption(d, "execute", options); outcome != OutcomeSelected || id != want {
				t.Errorf("%s: %s %q, want %q selected", d, outcome, id, want)
			}
		}
	})
	t.Run("distinct ids that differ only in case or space are distinct options", func(t *testing.T) {
		options := []Option{named("a", "Allow", "allow_once"), named("A", "Reject", "reject_once"), named("a ", "Reject", "reject_always")}
		if outcome, id := SelectOption(Reject, "execute", options); outcome != OutcomeSelected || id != "A" {
			t.Errorf("reject: %s %q, want A", outcome, id)
		}
	})
	t.Run("an agent's long id is bounded in the reason", func(t *testing.T) {
		long := strings.Repeat("é", 200)
		why := Ambiguous([]Option{named(long, "Allow", "allow_once"), named(long, "Reject", "reject_once")})
		if len(why) > 300 || !strings.Contains(why, "…") {
			t.Errorf("reason of %d bytes: %q", len(why), why)
		}
	})
}
