package whatif_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/whatif"
)

func TestChanged(t *testing.T) {
	rec := func(d policies.Decision, outcome, option, rule string) whatif.Answer {
		return whatif.Answer{Decision: d, Outcome: outcome, OptionID: option, Rule: rule, From: whatif.FromRecord}
	}
	sent := func(d policies.Decision, outcome, option string) whatif.Answer {
		return whatif.Answer{Decision: d, Outcome: outcome, OptionID: option, From: whatif.FromResponse}
	}
	now := func(d policies.Decision, outcome, option, rule string) whatif.Answer {
		return whatif.Answer{Decision: d, Outcome: outcome, OptionID: option, Rule: rule}
	}
	const sel, can = policies.OutcomeSelected, policies.OutcomeCancelled
	for _, c := range []struct {
		name     string
		old, new whatif.Answer
		want     bool
	}{
		{"the same decision by the same rule is unchanged", rec("allow", sel, "a1", "1"), now("allow", sel, "a1", "1"), false},
		{"the same decision by another rule is unchanged", rec("allow", sel, "a1", "1"), now("allow", sel, "a1", "3"), false},
		{"reject becoming allow is a change", rec("reject", sel, "r1", "default"), now("allow", sel, "a1", "2"), true},
		{"allow becoming allow_always is a change", rec("allow", sel, "a1", "1"), now("allow_always", sel, "aa", "1"), true},
		{"reject becoming cancel is a change", rec("reject", sel, "r1", "1"), now("cancel", can, "", "1"), true},
		{"the same decision with another outcome is a change", rec("reject", can, "", "1"), now("reject", sel, "r1", "1"), true},
		{"an answer sent alone is compared as the agent gets it: the same option", sent("reject", sel, "r1"), now("reject", sel, "r1", "2"), false},
		{"an answer sent alone: cancelled, and a reject that finds no option", sent("cancel", can, ""), now("reject", can, "", "default"), false},
		{"an answer sent alone: another option", sent("allow", sel, "a1"), now("reject", sel, "r1", "1"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := whatif.Changed(c.old, c.new); got != c.want {
				t.Errorf("Changed(%+v, %+v) = %v, want %v", c.old, c.new, got, c.want)
			}
		})
	}
}

// rules is an expr permission policy, as a workflow's YAML decodes.
func rules(t testing.TB, def string, rs ...[2]string) policies.Permission {
	t.Helper()
	var list []any
	for _, r := range rs {
		list = append(list, map[string]any{"if": r[0], "then": r[1]})
	}
	p, err := policies.ParsePermission(map[string]any{"rules": list, "default": def}, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testRun re-decides run under pol and returns every result and the totals.
func testRun(t *testing.T, pol *whatif.Policies, runs ...*whatif.Run) ([]*whatif.Result, whatif.Totals) {
	t.Helper()
	w := whatif.New(pol)
	var out []*whatif.Result
	for _, run := range runs {
		if err := w.Test(context.Background(), run, whatif.Report{Request: func(r *whatif.Result) error { out = append(out, r); return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	return out, w.Totals()
}

func TestEachRecordedRequestIsDecidedAgainAndCompared(t *testing.T) {
	ws := t.TempDir()
	pol := &whatif.Policies{Source: policies.SourceWorkflow, Permission: rules(t, "reject",
		[2]string{`tool.kind in ["read", "search"]`, "allow"},
		[2]string{`any(commands(tool.command), # startsWith "rm ")`, "reject"},
		[2]string{`tool.kind == "edit" && all(tool.locations, .in_workspace)`, "allow"},
		[2]string{`tool.kind == "execute"`, "allow"},
	)}
	codexArgv := map[string]any{"command": []any{"/bin/bash", "-lc", "make && rm -rf x"}}
	run := &whatif.Run{ID: "run1", Workflow: "wf", Steps: []transcript.Step{turn("work", ws, []call{
		{id: "c1", kind: "read", title: "README.md", answer: "allow-once", record: record("c1", "allow", "allow-once", "2")},
		{id: "c2", kind: "execute", title: "go test", rawInput: map[string]any{"command": "go test ./..."}, answer: "reject-once", record: record("c2", "reject", "reject-once", "default")},
		{id: "c3", kind: "execute", title: "make", rawInput: codexArgv, answer: "reject-once"},
		{id: "c4", kind: "edit", title: "a.go", locations: []string{filepath.Join(ws, "src", "a.go")}, answer: "allow-once", record: record("c4", "allow", "allow-once", "1")},
		{id: "c5", kind: "edit", title: "passwd", locations: []string{"/etc/passwd"}, answer: "allow-once", record: record("c5", "allow", "allow-once", "1")},
		{id: "c6", kind: "execute", title: "ls", answer: "-"},
	})}}
	got, tot := testRun(t, pol, run)
	if len(got) != 6 {
		t.Fatalf("%d results, want 6", len(got))
	}
	check := func(name string, r *whatif.Result, changed bool, old, new policies.Decision, oldRule, newRule string) {
		t.Run(name, func(t *testing.T) {
			if r.Skipped != "" {
				t.Fatalf("skipped: %s", r.Skipped)
			}
			if r.Changed != changed || r.Old.Decision != old || r.New.Decision != new || r.Old.Rule != oldRule || r.New.Rule != newRule {
				t.Errorf("changed %v, %s (rule %q) → %s (rule %q); want changed %v, %s (rule %q) → %s (rule %q)",
					r.Changed, r.Old.Decision, r.Old.Rule, r.New.Decision, r.New.Rule, changed, old, oldRule, new, newRule)
			}
			if r.RunID != "run1" || r.Workflow != "wf" || r.Step != "work" || r.Attempt != 1 {
				t.Errorf("result names run %q, workflow %q, step %q, attempt %d", r.RunID, r.Workflow, r.Step, r.Attempt)
			}
		})
	}
	check("the same decision by another rule is unchanged, with both rules", got[0], false, "allow", "allow", "2", "1")
	check("a reject that becomes an allow is a change", got[1], true, "reject", "allow", "default", "4")
	check("the codex argv's script is the command the rules see", got[2], false, "reject", "reject", "", "2")
	check("a path inside the session's cwd is in the workspace", got[3], false, "allow", "allow", "1", "3")
	check("a path outside it is not", got[4], true, "allow", "reject", "1", "default")
	if r := got[2]; r.Command != "make && rm -rf x" || r.Old.From != whatif.FromResponse || r.SameRule {
		t.Errorf("codex request: command %q, old from %q, same rule %v", r.Command, r.Old.From, r.SameRule)
	}
	if got[0].SameRule || got[1].SameRule {
		t.Errorf("same_rule of the first two = %v, %v", got[0].SameRule, got[1].SameRule)
	}
	if r := got[5]; r.Skipped == "" || r.Old != nil || r.New != nil {
		t.Errorf("a request the transcript ends before: %+v", r)
	}
	want := whatif.Totals{Runs: 1, Transcripts: 1, Requests: 6, Changed: 2, Unchanged: 3, Skipped: 1, Pairs: []whatif.Pair{
		{Old: "allow", New: "allow", Count: 2}, {Old: "allow", New: "reject", Count: 1},
		{Old: "reject", New: "allow", Count: 1}, {Old: "reject", New: "reject", Count: 1},
	}}
	if !equalTotals(tot, want) {
		t.Errorf("totals = %+v, want %+v", tot, want)
	}
}

func equalTotals(a, b whatif.Totals) bool {
	return slices.Equal(a.Pairs, b.Pairs) && a.Runs == b.Runs && a.Transcripts == b.Transcripts &&
		a.Truncated == b.Truncated && a.Requests == b.Requests && a.Changed == b.Changed &&
		a.Unchanged == b.Unchanged && a.Skipped == b.Skipped
}

func TestAStepsOwnPolicyDecidesItsRequests(t *testing.T) {
	allow, _ := policies.ParseShorthand("allow")
	pol := &whatif.Policies{Permission: policies.DefaultPermission(), Source: policies.SourceDefault,
		Steps: map[string]policies.Permission{"fix": allow}}
	run := &whatif.Run{ID: "r", Steps: []transcript.Step{
		turn("plan", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "allow-once", record: record("c1", "allow", "allow-once", "1")}}),
		turn("fix", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "allow-once", record: record("c1", "allow", "allow-once", "1")}}),
	}}
	got, _ := testRun(t, pol, run)
	if got[0].New.Decision != "reject" || got[0].New.Policy != policies.SourceDefault || !got[0].Changed {
		t.Errorf("plan: %+v", got[0].New)
	}
	if got[1].New.Decision != "allow" || got[1].New.Policy != policies.SourceStep || got[1].New.Rule != "shorthand" || got[1].Changed {
		t.Errorf("fix: %+v", got[1].New)
	}
}

func TestRequestsNoPolicyAnsweredAreNotDecidedAgain(t *testing.T) {
	pol := &whatif.Policies{Permission: rules(t, "allow"), Source: policies.SourceWorkflow}
	own := record("c1", "cancel", "", "turn-cancelled")
	cancelled := turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: ""}})
	// session/cancel goes out after the prompt, before the request.
	cancel := transcript.Message{Dir: transcript.ToAgent, Msg: json.RawMessage(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"demo-1"}}`)}
	cancelled.Messages = slices.Insert(cancelled.Messages, 5, cancel)
	invalid := turn("s", "/ws", nil)
	invalid.Messages = append(invalid.Messages,
		transcript.Message{Dir: transcript.FromAgent, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"demo-1","toolCall":{"toolCallId":"c9"}}}`)},
		transcript.Message{Dir: transcript.ToAgent, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Invalid params"}}`)})
	for _, c := range []struct {
		name string
		step transcript.Step
	}{
		{"a record of acpflow's own answer", turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "", record: own}})},
		{"a request after the turn was cancelled", cancelled},
		{"a request answered with an error", turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "!"}})},
		{"a request the SDK refuses as invalid", invalid},
		{"a request without an answer", turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "-"}})},
	} {
		t.Run(c.name+" is skipped, with the reason", func(t *testing.T) {
			got, tot := testRun(t, pol, &whatif.Run{ID: "r", Steps: []transcript.Step{c.step}})
			if len(got) != 1 || got[0].Skipped == "" || got[0].New != nil || got[0].Changed {
				t.Fatalf("results = %+v", got)
			}
			if tot.Skipped != 1 || tot.Changed != 0 || len(tot.Pairs) != 0 {
				t.Errorf("totals = %+v", tot)
			}
			t.Log(got[0].Skipped)
		})
	}
}

func TestRepeatedToolCallIDsMatchTheRecordOfTheirOwnAnswer(t *testing.T) {
	// Two attempts of a step, each asking for call_1, the first rejected
	// and the second allowed; the step's records are all on the last one
	// (as the run store keeps them: every attempt's, in order).
	pol := &whatif.Policies{Permission: rules(t, "reject"), Source: policies.SourceWorkflow}
	first := turn("s", "/ws", []call{{id: "call_1", kind: "execute", title: "ls", answer: "reject-once"}})
	second := turn("s", "/ws", []call{{id: "call_1", kind: "execute", title: "ls", answer: "allow-once"}})
	second.Attempt = 2
	second.Permissions = []policies.PermissionRecord{
		*record("call_1", "reject", "reject-once", "default"),
		*record("call_1", "allow", "allow-once", "1"),
	}
	got, _ := testRun(t, pol, &whatif.Run{ID: "r", Steps: []transcript.Step{first, second}})
	if got[0].Old.Rule != "default" || got[0].Changed {
		t.Errorf("attempt 1: old %+v, changed %v", got[0].Old, got[0].Changed)
	}
	if got[1].Old.Rule != "1" || !got[1].Changed || got[1].Attempt != 2 {
		t.Errorf("attempt 2: old %+v, changed %v", got[1].Old, got[1].Changed)
	}
}

func TestATruncatedTranscriptIsCounted(t *testing.T) {
	s := turn("s", "/ws", []call{{id: "c1", kind: "read", title: "x", answer: "allow-once"}})
	s.Truncated = true
	_, tot := testRun(t, &whatif.Policies{Permission: rules(t, "allow")}, &whatif.Run{ID: "r", Steps: []transcript.Step{s}})
	if tot.Truncated != 1 || tot.Transcripts != 1 || tot.Unchanged != 1 {
		t.Errorf("totals = %+v", tot)
	}
}

func TestAStepThatOpenedNoSessionIsJudgedFromTheRunsWorkspace(t *testing.T) {
	ws := t.TempDir()
	pol := &whatif.Policies{Permission: rules(t, "reject", [2]string{`all(tool.locations, .in_workspace)`, "allow"})}
	first := turn("plan", ws, nil)
	// `session: plan` on plan's live process: no session/new, so no cwd.
	cont := turn("fix", "unused", []call{{id: "c1", kind: "edit", title: "a.go", locations: []string{"a.go"}, answer: "allow-once"}})
	cont.Messages = slices.DeleteFunc(cont.Messages, func(m transcript.Message) bool {
		return strings.Contains(string(m.Msg), `"session/new"`)
	})
	for _, c := range []struct {
		name      string
		workspace string
	}{
		{"a recorded run's workspace", ws},
		{"the run's first cwd in a file", ""},
	} {
		t.Run(c.name+" stands in for the cwd", func(t *testing.T) {
			got, _ := testRun(t, pol, &whatif.Run{ID: "r", Workspace: c.workspace, Steps: []transcript.Step{first, cont}})
			if len(got) != 1 || got[0].New == nil || got[0].New.Decision != "allow" || got[0].Changed {
				t.Fatalf("results = %+v", got)
			}
		})
	}
}

func TestRequestsAreDecidedWithinTheOuterPolicy(t *testing.T) {
	outer := policies.Outer{{File: "/etc/acpflow/policy.yaml", Permission: rules(t, "allow",
		[2]string{`any(commands(tool.command), # startsWith "rm ")`, "reject"})}}
	pol := &whatif.Policies{Permission: rules(t, "reject", [2]string{`tool.kind == "execute"`, "allow"}), Source: policies.SourceWorkflow, Outer: outer}
	byOuter := record("c3", "reject", "reject-once", "1")
	byOuter.Layer, byOuter.Policy = policies.LayerOuter, "/etc/acpflow/policy.yaml"
	run := &whatif.Run{ID: "r", Steps: []transcript.Step{turn("s", "/ws", []call{
		{id: "c1", kind: "execute", title: "rm -rf build", answer: "allow-once", record: record("c1", "allow", "allow-once", "1")},
		{id: "c2", kind: "execute", title: "make", answer: "allow-once", record: record("c2", "allow", "allow-once", "1")},
		{id: "c3", kind: "execute", title: "rm x", answer: "reject-once", record: byOuter},
	})}}
	got, tot := testRun(t, pol, run)
	if len(got) != 3 {
		t.Fatalf("%d results", len(got))
	}
	if n := got[0].New; !got[0].Changed || n.Decision != "reject" || n.Layer != policies.LayerOuter || n.Policy != "/etc/acpflow/policy.yaml" || n.Rule != "1" || got[0].SameRule {
		t.Errorf("rm: changed %v, new %+v, same rule %v; want rejected by the outer file's rule 1, not the same rule as the workflow's 1", got[0].Changed, n, got[0].SameRule)
	}
	if n := got[1].New; got[1].Changed || n.Decision != "allow" || n.Layer != policies.LayerWorkflow || n.Rule != "1" || !got[1].SameRule {
		t.Errorf("make: changed %v, new %+v, same rule %v; want allowed by the workflow's rule 1 as recorded", got[1].Changed, n, got[1].SameRule)
	}
	if got[2].Changed || !got[2].SameRule || got[2].Old.Layer != policies.LayerOuter {
		t.Errorf("rm x: %+v → %+v, same rule %v; want the outer file's rule 1 both times", got[2].Old, got[2].New, got[2].SameRule)
	}
	if tot.Changed != 1 {
		t.Errorf("totals %+v", tot)
	}
}
