package policies

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// allOptions are the four kinds of option, as most agents offer them.
var allOptions = []Option{
	{ID: "a1", Kind: "allow_once"}, {ID: "aa", Kind: "allow_always"},
	{ID: "r1", Kind: "reject_once"}, {ID: "ra", Kind: "reject_always"},
}

// countingPermission answers d and counts the calls: a policy that must
// not be asked is one whose count stays 0.
type countingPermission struct {
	d     Decision
	calls *int
}

func (c countingPermission) DecidePermission(context.Context, *PermissionRequest) (Verdict, error) {
	*c.calls++
	return Verdict{Decision: c.d, Rule: "counted", Reason: "the workflow's reason"}, nil
}

type failingPermission struct{}

func (failingPermission) DecidePermission(context.Context, *PermissionRequest) (Verdict, error) {
	return Verdict{Rule: "3"}, errors.New("boom")
}

func TestOuterAnswerEachOuterDecisionAgainstEachWorkflowDecision(t *testing.T) {
	workflowDecisions := []Decision{Allow, AllowAlways, Reject, RejectAlways, Cancel}
	// outer is the outer file's decision; "" is a file without a
	// permission section, "fail" one whose policy errors.
	for _, outer := range []Decision{"", Allow, AllowAlways, Reject, RejectAlways, Cancel, "fail"} {
		for _, wd := range workflowDecisions {
			name := fmt.Sprintf("outer %s, workflow %s", orWord(string(outer), "absent"), wd)
			t.Run(name, func(t *testing.T) {
				calls := 0
				o := Outer{{File: "/etc/acpflow/policy.yaml"}}
				switch outer {
				case "":
				case "fail":
					o[0].Permission = failingPermission{}
				default:
					o[0].Permission = Shorthand{Decision: outer}
				}
				req := &PermissionRequest{Tool: Tool{ID: "call_1", Kind: "execute", Command: "rm -rf build"}, Options: allOptions}
				rec := o.Answer(context.Background(), countingPermission{d: wd, calls: &calls}, SourceStep, req)

				switch outer {
				case Reject, RejectAlways, Cancel, "fail":
					want := outer
					if outer == "fail" {
						want = Reject
					}
					if rec.Layer != LayerOuter || rec.Policy != "/etc/acpflow/policy.yaml" || rec.Decision != want || calls != 0 {
						t.Errorf("record %+v after %d calls of the workflow's policy; want %s decided by the outer file alone", rec, calls, want)
					}
					if outer == "fail" && (rec.Rule != "3" || !strings.Contains(rec.Reason, "policy error: boom")) {
						t.Errorf("a failing outer policy: rule %q reason %q", rec.Rule, rec.Reason)
					}
				default:
					want, reason := wd, "the workflow's reason"
					if outer == Allow && wd == AllowAlways {
						want, reason = Allow, "the workflow's reason; allow_always capped to allow by the outer policy (/etc/acpflow/policy.yaml)"
					}
					if rec.Layer != LayerWorkflow || rec.Policy != SourceStep || rec.Rule != "counted" || rec.Decision != want || calls != 1 {
						t.Errorf("record %+v after %d calls; want %s by the workflow's policy (step), asked once", rec, calls, want)
					}
					if rec.Reason != reason {
						t.Errorf("reason %q, want %q", rec.Reason, reason)
					}
					if outcome, option := SelectOption(want, "execute", allOptions); rec.Outcome != outcome || rec.OptionID != option {
						t.Errorf("answered %s %s, want %s %s", rec.Outcome, rec.OptionID, outcome, option)
					}
				}
			})
		}
	}
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}

func TestOuterAnswerStacksItsFilesOutermostFirst(t *testing.T) {
	req := func() *PermissionRequest {
		return &PermissionRequest{Tool: Tool{ID: "c", Kind: "execute"}, Options: allOptions}
	}
	t.Run("the first file that rejects decides, and no later file is asked", func(t *testing.T) {
		later := 0
		o := Outer{
			{File: "/etc/acpflow/policy.yaml", Permission: Shorthand{Decision: AllowAlways}},
			{File: "/home/u/.config/acpflow/policy.yaml", Permission: Shorthand{Decision: RejectAlways}},
			{File: "/tmp/flag.yaml", Permission: countingPermission{d: Allow, calls: &later}},
		}
		rec := o.Answer(context.Background(), countingPermission{d: Allow, calls: &later}, SourceWorkflow, req())
		if rec.Layer != LayerOuter || rec.Policy != "/home/u/.config/acpflow/policy.yaml" || rec.Decision != RejectAlways || rec.OptionID != "ra" || later != 0 {
			t.Errorf("record %+v, %d later calls", rec, later)
		}
	})
	t.Run("a later file cannot loosen an earlier one's allow into allow_always", func(t *testing.T) {
		o := Outer{
			{File: "/etc/acpflow/policy.yaml", Permission: Shorthand{Decision: Allow}},
			{File: "/tmp/flag.yaml", Permission: Shorthand{Decision: AllowAlways}},
		}
		rec := o.Answer(context.Background(), Shorthand{Decision: AllowAlways}, SourceWorkflow, req())
		if rec.Decision != Allow || rec.OptionID != "a1" || !strings.Contains(rec.Reason, "capped to allow by the outer policy (/etc/acpflow/policy.yaml)") {
			t.Errorf("record %+v", rec)
		}
	})
	t.Run("a file without a permission section is no layer", func(t *testing.T) {
		o := Outer{{File: "/etc/acpflow/policy.yaml", Env: DefaultEnv()}}
		rec := o.Answer(context.Background(), Shorthand{Decision: AllowAlways}, SourceWorkflow, req())
		if rec.Decision != AllowAlways || rec.Layer != LayerWorkflow {
			t.Errorf("record %+v", rec)
		}
	})
	t.Run("a capped allow_always where the agent offers no allow_once is cancelled, saying why", func(t *testing.T) {
		o := Outer{{File: "/etc/acpflow/policy.yaml", Permission: Shorthand{Decision: Allow}}}
		r := req()
		r.Options = []Option{{ID: "aa", Kind: "allow_always"}, {ID: "r1", Kind: "reject_once"}}
		rec := o.Answer(context.Background(), Shorthand{Decision: AllowAlways}, SourceWorkflow, r)
		if rec.Decision != Allow || rec.Outcome != OutcomeCancelled || rec.OptionID != "" || !strings.HasSuffix(rec.Reason, "; no matching option") {
			t.Errorf("record %+v", rec)
		}
	})
	t.Run("no outer policy answers as Answer does, layer workflow", func(t *testing.T) {
		rec := Outer(nil).Answer(context.Background(), DefaultPermission(), SourceDefault, req())
		want := Answer(context.Background(), DefaultPermission(), SourceDefault, req())
		if rec.Layer != LayerWorkflow || fmt.Sprint(rec) != fmt.Sprint(want) {
			t.Errorf("record %+v, want %+v", rec, want)
		}
	})
}

// envRulesOf parses an env spec the way a policy file's env: is parsed.
func envRulesOf(t *testing.T, spec map[string]any) Env {
	t.Helper()
	e, err := ParseEnv(spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func rule(cond, then string) map[string]any { return map[string]any{"if": cond, "then": then} }

// ceilingEnv is an env policy of another form than expr rules (a WASM
// module's stand-in): it answers its env whole, or denies.
type ceilingEnv struct {
	env  map[string]string
	deny string
	err  error
	seen *EnvRequest
}

func (c *ceilingEnv) DecideEnv(_ context.Context, req *EnvRequest) (EnvDecision, error) {
	cp := *req
	c.seen = &cp
	if c.err != nil {
		return EnvDecision{Rule: "env.wasm"}, c.err
	}
	return EnvDecision{Env: maps.Clone(c.env), Deny: c.deny, Rule: "env.wasm", Stderr: "module said hi"}, nil
}

func TestOuterBuildEnv(t *testing.T) {
	const file = "/etc/acpflow/policy.yaml"
	awsDrop := func(t *testing.T) Env {
		return envRulesOf(t, map[string]any{"rules": []any{rule(`name startsWith "AWS_"`, "drop")}})
	}
	keepAll := func(t *testing.T) Env {
		return envRulesOf(t, map[string]any{"rules": []any{rule(`name startsWith "AWS_" || name == "GITHUB_TOKEN"`, "keep")}})
	}
	amb := func() map[string]string {
		return map[string]string{"PATH": "/bin", "HOME": "/home/u", "AWS_SECRET_ACCESS_KEY": "aws-ambient-secret", "AWS_REGION": "eu-west-1",
			"GITHUB_TOKEN": "ghp_ambient", "ACPFLOW_DEBUG": "1", "EDITOR": "vi"}
	}
	tests := []struct {
		name     string
		outer    func(t *testing.T) Outer
		workflow func(t *testing.T) Env
		explicit map[string]string
		want     []string // the child's environment; nil when the spawn is refused
		wantErr  string   // part of the *OuterEnvError's message
		wantRule string   // of the refusal
	}{
		{
			name:     "an ambient variable the outer rules drop is gone, although the workflow's rules keep it",
			outer:    func(t *testing.T) Outer { return Outer{{File: file, Env: awsDrop(t)}} },
			workflow: keepAll,
			// The outer file's default scrub-credentials drops GITHUB_TOKEN too.
			want: []string{"EDITOR=vi", "HOME=/home/u", "PATH=/bin"},
		},
		{
			name: "an outer file that leaves credentials to the workflow lets its keep rule work",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: envRulesOf(t, map[string]any{"scrub-credentials": false, "rules": []any{rule(`name startsWith "AWS_"`, "drop")}})}}
			},
			workflow: keepAll,
			want:     []string{"EDITOR=vi", "GITHUB_TOKEN=ghp_ambient", "HOME=/home/u", "PATH=/bin"},
		},
		{
			name:     "an explicit variable the outer rules drop refuses the spawn, naming the variable and the rule",
			outer:    func(t *testing.T) Outer { return Outer{{File: file, Env: awsDrop(t)}} },
			explicit: map[string]string{"AWS_SECRET_ACCESS_KEY": "aws-explicit-secret", "ANTHROPIC_API_KEY": "sk-explicit"},
			wantErr:  "outer policy (/etc/acpflow/policy.yaml) refuses AWS_SECRET_ACCESS_KEY set by the workflow's env (rule 1); nothing was spawned",
			wantRule: "1",
		},
		{
			name: "an explicit credential passes: inherit and scrub-credentials only thin what is inherited",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: envRulesOf(t, map[string]any{"inherit": "none"})}}
			},
			explicit: map[string]string{"ANTHROPIC_API_KEY": "sk-explicit"},
			want:     []string{"ANTHROPIC_API_KEY=sk-explicit"},
		},
		{
			name: "an outer keep rule does not widen the workflow's own policy",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: envRulesOf(t, map[string]any{"rules": []any{rule(`name == "GITHUB_TOKEN"`, "keep")}})}}
			},
			want: []string{"AWS_REGION=eu-west-1", "EDITOR=vi", "HOME=/home/u", "PATH=/bin"},
		},
		{
			name: "a rule that holds for an explicit value by its value catches a copy under another name",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: envRulesOf(t, map[string]any{"rules": []any{rule(`value startsWith "aws-"`, "drop")}})}}
			},
			explicit: map[string]string{
				"COPIED": "aws-ambient-secret",
			},
			wantErr:  "refuses COPIED set by the workflow's env (rule 1)",
			wantRule: "1",
		},
		{
			name: "stacked files: each one's drops hold, outermost first",
			outer: func(t *testing.T) Outer {
				return Outer{
					{File: file, Env: envRulesOf(t, map[string]any{"scrub-credentials": false, "rules": []any{rule(`name == "EDITOR"`, "drop")}})},
					{File: "/tmp/flag.yaml", Env: awsDrop(t)},
				}
			},
			workflow: keepAll,
			// The second file scrubs credentials (its default).
			want: []string{"HOME=/home/u", "PATH=/bin"},
		},
		{
			name: "a module's answer is a ceiling: the explicit names it leaves out refuse the spawn",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: &ceilingEnv{env: map[string]string{"PATH": "/bin", "KEEP": "k"}}}}
			},
			explicit: map[string]string{"KEEP": "k", "EXTRA": "extra-value"},
			wantErr:  "refuses EXTRA set by the workflow's env (rule env.wasm)",
			wantRule: "env.wasm",
		},
		{
			name: "a module's answer is what the workflow's layer starts from: its values, the names it adds",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: &ceilingEnv{env: map[string]string{"PATH": "/org/bin", "HTTPS_PROXY": "http://org-proxy", "KEEP": "org-value"}}}}
			},
			explicit: map[string]string{"KEEP": "workflow-value"},
			want:     []string{"HTTPS_PROXY=http://org-proxy", "KEEP=org-value", "PATH=/org/bin"},
		},
		{
			name:    "a module that denies refuses the spawn with its reason",
			outer:   func(t *testing.T) Outer { return Outer{{File: file, Env: &ceilingEnv{deny: "no agents on Fridays"}}} },
			wantErr: "outer policy (/etc/acpflow/policy.yaml) refused the spawn (rule env.wasm): no agents on Fridays",
		},
		{
			name:    "a module that fails refuses the spawn",
			outer:   func(t *testing.T) Outer { return Outer{{File: file, Env: &ceilingEnv{err: errors.New("trap")}}} },
			wantErr: "outer policy (/etc/acpflow/policy.yaml) failed, spawn refused: trap",
		},
		{
			name:  "a variable the workflow's module adds is judged as an explicit one",
			outer: func(t *testing.T) Outer { return Outer{{File: file, Env: awsDrop(t)}} },
			workflow: func(t *testing.T) Env {
				return &ceilingEnv{env: map[string]string{"PATH": "/bin", "AWS_PROFILE": "prod"}}
			},
			wantErr:  "refuses AWS_PROFILE set by the workflow's env policy (rule 1)",
			wantRule: "1",
		},
		{
			name: "a variable the workflow's module adds under a module ceiling must be in its answer",
			outer: func(t *testing.T) Outer {
				return Outer{{File: file, Env: &ceilingEnv{env: map[string]string{"PATH": "/bin"}}}}
			},
			workflow: func(t *testing.T) Env {
				return &ceilingEnv{env: map[string]string{"PATH": "/bin", "HOME": "/elsewhere"}}
			},
			wantErr: "refuses HOME set by the workflow's env policy (rule env.wasm)",
		},
		{
			name:  "a file without an env section is no layer",
			outer: func(t *testing.T) Outer { return Outer{{File: file, Permission: DefaultPermission()}} },
			want:  []string{"AWS_REGION=eu-west-1", "EDITOR=vi", "HOME=/home/u", "PATH=/bin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wf Env
			if tt.workflow != nil {
				wf = tt.workflow(t)
			}
			req := &EnvRequest{Request: Request{Kind: KindEnv, Agent: "x"}, Ambient: amb(), Explicit: tt.explicit}
			dec, err := tt.outer(t).BuildEnv(context.Background(), wf, req)
			if tt.wantErr != "" {
				var oe *OuterEnvError
				if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v (%T), want an OuterEnvError saying %q", err, err, tt.wantErr)
				}
				if tt.wantRule != "" && oe.Rule != tt.wantRule {
					t.Errorf("rule %q, want %q", oe.Rule, tt.wantRule)
				}
				for _, v := range []string{"aws-explicit-secret", "aws-ambient-secret", "extra-value", "sk-explicit"} {
					if strings.Contains(err.Error(), v) {
						t.Errorf("the error shows the value %q: %v", v, err)
					}
				}
				return
			}
			if err != nil || dec.Deny != "" {
				t.Fatalf("refused: %v %q", err, dec.Deny)
			}
			if got := EnvList(dec.Env); !slices.Equal(got, tt.want) {
				t.Errorf("env %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestOuterBuildEnvRecordsEachFileAndSendsModulesTheExplicitValues(t *testing.T) {
	module := &ceilingEnv{env: map[string]string{"PATH": "/bin", "TOKEN_FOR_AGENT": "t"}}
	o := Outer{
		{File: "/etc/acpflow/policy.yaml", Env: DefaultEnv()},
		{File: "/tmp/flag.yaml", Env: module},
	}
	req := &EnvRequest{Ambient: map[string]string{"PATH": "/bin", "GITHUB_TOKEN": "ghp_x"}, Explicit: map[string]string{"TOKEN_FOR_AGENT": "t"}}
	dec, err := o.BuildEnv(context.Background(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []OuterEnvRule{
		{Policy: "/etc/acpflow/policy.yaml", Rule: "inherit=all,scrub-credentials"},
		{Policy: "/tmp/flag.yaml", Rule: "env.wasm", Stderr: "module said hi"},
	}
	if !slices.Equal(dec.Outer, want) {
		t.Errorf("outer %+v, want %+v", dec.Outer, want)
	}
	if dec.Rule != "inherit=all,scrub-credentials" || !slices.Equal(EnvList(dec.Env), []string{"PATH=/bin", "TOKEN_FOR_AGENT=t"}) {
		t.Errorf("decision %+v", dec)
	}
	// The module, second, saw what the first file kept, and the explicit values.
	if _, ok := module.seen.Ambient["GITHUB_TOKEN"]; ok || module.seen.Explicit["TOKEN_FOR_AGENT"] != "t" {
		t.Errorf("the module was sent %+v", module.seen)
	}
}

func TestOuterBuildEnvWithoutAnOuterPolicyIsBuildEnv(t *testing.T) {
	req := &EnvRequest{Ambient: ambient(), Explicit: map[string]string{"CODEX_API_KEY": "k"}}
	dec, err := Outer(nil).BuildEnv(context.Background(), nil, req)
	want, _ := BuildEnv(context.Background(), nil, req)
	if err != nil || !maps.Equal(dec.Env, want.Env) || dec.Rule != want.Rule || dec.Outer != nil {
		t.Errorf("decision %+v, %v; want %+v", dec, err, want)
	}
}

func TestOuterBuildEnvAFailingRuleOnAnExplicitValueFailsClosedWithoutTheValue(t *testing.T) {
	o := Outer{{File: "/etc/acpflow/policy.yaml", Env: envRulesOf(t, map[string]any{"rules": []any{rule(`int(value) > 3`, "drop")}})}}
	req := &EnvRequest{Ambient: map[string]string{}, Explicit: map[string]string{"SECRET_THING": "not-a-number-secret"}}
	_, err := o.BuildEnv(context.Background(), nil, req)
	var oe *OuterEnvError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "failed, spawn refused") || oe.Var != "" {
		t.Fatalf("error %v, want the outer policy failing", err)
	}
	if strings.Contains(err.Error(), "not-a-number-secret") {
		t.Errorf("the error shows the value: %v", err)
	}
}

// TestOuterAdmitJudgesValuesBesideTheEnvAsExplicitOnes covers the values
// a workflow hands to the agent's side besides its env (class: an MCP
// server's env and headers), for each form of outer env policy: the drop
// an outer file holds for the agent's env holds for them, by name and by
// value, and nothing else refuses them.
func TestOuterAdmitJudgesValuesBesideTheEnvAsExplicitOnes(t *testing.T) {
	const file = "/etc/acpflow/policy.yaml"
	const setBy = "step s's mcp-servers.gh.env"
	orgRules := func(t *testing.T) Env {
		return envRulesOf(t, map[string]any{"rules": []any{
			rule(`name == "ALLOWED_AWS_THING"`, "keep"),
			rule(`name startsWith "AWS_"`, "drop"),
			rule(`value contains "AKIA"`, "drop"),
		}})
	}
	for _, tc := range []struct {
		name     string
		outer    func(t *testing.T) Outer
		values   map[string]string
		wantErr  string // "" when admitted
		wantRule string
	}{
		{"a name an outer rule drops", func(t *testing.T) Outer { return Outer{{File: file, Env: orgRules(t)}} },
			map[string]string{"GITHUB_TOKEN": "ghp-fine", "AWS_SECRET_ACCESS_KEY": "aws-mcp-secret"},
			"outer policy (/etc/acpflow/policy.yaml) refuses AWS_SECRET_ACCESS_KEY set by step s's mcp-servers.gh.env (rule 2); nothing was spawned", "2"},
		{"a value an outer rule drops, under another name (a header)", func(t *testing.T) Outer { return Outer{{File: file, Env: orgRules(t)}} },
			map[string]string{"Authorization": "Bearer AKIA-mcp-secret"},
			"refuses Authorization set by step s's mcp-servers.gh.env (rule 3)", "3"},
		{"an outer keep rule before the drop admits it", func(t *testing.T) Outer { return Outer{{File: file, Env: orgRules(t)}} },
			map[string]string{"ALLOWED_AWS_THING": "x"}, "", ""},
		{"credentials pass: inherit and scrub-credentials only thin what is inherited", func(t *testing.T) Outer {
			return Outer{{File: file, Env: envRulesOf(t, map[string]any{"inherit": "none"})}}
		}, map[string]string{"GITHUB_TOKEN": "ghp-fine"}, "", ""},
		{"the second of stacked files drops it", func(t *testing.T) Outer {
			return Outer{{File: "/first.yaml", Env: DefaultEnv()}, {File: file, Env: orgRules(t)}}
		}, map[string]string{"AWS_PROFILE": "prod"}, "outer policy (/etc/acpflow/policy.yaml) refuses AWS_PROFILE", "2"},
		{"a module's answer that leaves a name out", func(t *testing.T) Outer {
			return Outer{{File: file, Env: &ceilingEnv{env: map[string]string{"KEEP": "k"}}}}
		}, map[string]string{"KEEP": "k", "EXTRA": "extra-mcp-secret"}, "refuses EXTRA set by step s's mcp-servers.gh.env (rule env.wasm)", "env.wasm"},
		{"a module's answer that keeps every name", func(t *testing.T) Outer {
			return Outer{{File: file, Env: &ceilingEnv{env: map[string]string{"KEEP": "other"}}}}
		}, map[string]string{"KEEP": "k"}, "", ""},
		{"a module that denies", func(t *testing.T) Outer { return Outer{{File: file, Env: &ceilingEnv{deny: "no MCP"}}} },
			map[string]string{"KEEP": "k"}, "outer policy (/etc/acpflow/policy.yaml) refused the spawn (rule env.wasm): no MCP", "env.wasm"},
		{"a module that fails", func(t *testing.T) Outer { return Outer{{File: file, Env: &ceilingEnv{err: errors.New("trap")}}} },
			map[string]string{"KEEP": "k"}, "outer policy (/etc/acpflow/policy.yaml) failed, spawn refused: trap", "env.wasm"},
		{"a file without an env section", func(t *testing.T) Outer { return Outer{{File: file, Permission: DefaultPermission()}} },
			map[string]string{"AWS_SECRET_ACCESS_KEY": "aws-mcp-secret"}, "", ""},
		{"no values", func(t *testing.T) Outer { return Outer{{File: file, Env: &ceilingEnv{deny: "never asked"}}} }, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &EnvRequest{Request: Request{Kind: KindEnv, Agent: "a", Step: "s"}, Ambient: map[string]string{"PATH": "/bin"}}
			err := tc.outer(t).Admit(context.Background(), req, tc.values, setBy)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var oe *OuterEnvError
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want an OuterEnvError saying %q", err, tc.wantErr)
			}
			if oe.Rule != tc.wantRule {
				t.Errorf("rule %q, want %q", oe.Rule, tc.wantRule)
			}
			for _, v := range tc.values {
				if strings.Contains(err.Error(), v) {
					t.Errorf("the error shows the value %q: %v", v, err)
				}
			}
		})
	}
}

func TestOuterAdmitSendsAModuleTheValuesAsExplicitAndNoAmbient(t *testing.T) {
	module := &ceilingEnv{env: map[string]string{"T": "v"}}
	req := &EnvRequest{Request: Request{Kind: KindEnv, Step: "s", Cwd: "/ws"}, Ambient: map[string]string{"PATH": "/bin", "HOME": "/h"}}
	if err := (Outer{{File: "/o.yaml", Env: module}}).Admit(context.Background(), req, map[string]string{"T": "v"}, "x"); err != nil {
		t.Fatal(err)
	}
	if module.seen == nil || len(module.seen.Ambient) != 0 || !maps.Equal(module.seen.Explicit, map[string]string{"T": "v"}) ||
		module.seen.Step != "s" || module.seen.Cwd != "/ws" {
		t.Errorf("the module was sent %+v", module.seen)
	}
}
