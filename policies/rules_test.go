package policies

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// compileRule compiles a permission rule for a test.
func compileRule(t *testing.T, cond string, then Decision, reason string) PermissionRule {
	t.Helper()
	prog, err := CompilePermissionCondition(cond)
	if err != nil {
		t.Fatalf("compile %q: %v", cond, err)
	}
	return PermissionRule{If: prog, Then: then, Reason: reason}
}

// specRules are the rules of the docs/policies.md#permission-policies example.
func specRules(t *testing.T) []PermissionRule {
	return []PermissionRule{
		compileRule(t, `tool.kind in ["read", "search", "think"]`, Allow, ""),
		compileRule(t, `tool.kind == "execute" && tool.command matches "^(rm|sudo|curl) "`, Reject, "destructive or networked command"),
		compileRule(t, `tool.kind == "edit" && all(tool.locations, .in_workspace)`, Allow, ""),
	}
}

func TestPermissionRulesDecide(t *testing.T) {
	inWs := []ToolLocation{{Path: "/ws/a.go", InWorkspace: true}, {Path: "/ws/b.go", InWorkspace: true}}
	outWs := []ToolLocation{{Path: "/ws/a.go", InWorkspace: true}, {Path: "/etc/passwd", InWorkspace: false}}
	tests := []struct {
		name   string
		policy PermissionRules
		tool   Tool
		want   Verdict
	}{
		{
			name:   "a read is allowed by the first rule",
			policy: PermissionRules{Rules: specRules(t)},
			tool:   Tool{Kind: "read"},
			want:   Verdict{Decision: Allow, Rule: "1"},
		},
		{
			name:   "a destructive command is rejected with the rule's reason",
			policy: PermissionRules{Rules: specRules(t)},
			tool:   Tool{Kind: "execute", Command: "rm -rf build"},
			want:   Verdict{Decision: Reject, Rule: "2", Reason: "destructive or networked command"},
		},
		{
			name:   "an edit inside the workspace is allowed by the third rule",
			policy: PermissionRules{Rules: specRules(t)},
			tool:   Tool{Kind: "edit", Locations: inWs},
			want:   Verdict{Decision: Allow, Rule: "3"},
		},
		{
			name:   "an edit with one location outside the workspace falls to the default",
			policy: PermissionRules{Rules: specRules(t), Default: Cancel},
			tool:   Tool{Kind: "edit", Locations: outWs},
			want:   Verdict{Decision: Cancel, Rule: "default"},
		},
		{
			name:   "the default default is reject",
			policy: PermissionRules{Rules: specRules(t)},
			tool:   Tool{Kind: "execute", Command: "make"},
			want:   Verdict{Decision: Reject, Rule: "default"},
		},
		{
			name:   "no rules at all gives the default",
			policy: PermissionRules{Default: Allow},
			tool:   Tool{Kind: "execute"},
			want:   Verdict{Decision: Allow, Rule: "default"},
		},
		{
			name: "the first matching rule wins over later ones",
			policy: PermissionRules{Rules: []PermissionRule{
				compileRule(t, `tool.kind == "other"`, Cancel, "never"),
				compileRule(t, `tool.kind == "execute"`, AllowAlways, "first"),
				compileRule(t, `true`, RejectAlways, "second"),
			}},
			tool: Tool{Kind: "execute"},
			want: Verdict{Decision: AllowAlways, Rule: "2", Reason: "first"},
		},
		{
			name: "a compound command is caught by commands",
			policy: PermissionRules{Rules: []PermissionRule{
				compileRule(t, `any(commands(tool.command), # startsWith "rm ")`, Reject, "rm"),
				compileRule(t, `tool.kind == "execute"`, Allow, ""),
			}},
			tool: Tool{Kind: "execute", Command: "make && rm -rf x"},
			want: Verdict{Decision: Reject, Rule: "1", Reason: "rm"},
		},
		{
			name: "a compound command slips past a plain prefix match",
			policy: PermissionRules{Rules: []PermissionRule{
				compileRule(t, `tool.command matches "^rm "`, Reject, "rm"),
				compileRule(t, `tool.kind == "execute"`, Allow, ""),
			}},
			tool: Tool{Kind: "execute", Command: "make && rm -rf x"},
			want: Verdict{Decision: Allow, Rule: "2"},
		},
		{
			name: "raw_input is reachable",
			policy: PermissionRules{Rules: []PermissionRule{
				compileRule(t, `tool.raw_input.description == "clean up"`, Allow, ""),
			}},
			tool: Tool{Kind: "execute", RawInput: map[string]any{"description": "clean up"}},
			want: Verdict{Decision: Allow, Rule: "1"},
		},
		{
			name: "the policy's config is what config holds",
			policy: PermissionRules{
				Rules: []PermissionRule{
					compileRule(t, `any(tool.locations, {let p = .path; any(config.allow_paths, glob(#, p))})`, Allow, ""),
				},
				Config: map[string]any{"allow_paths": []any{"/ws/src/**"}},
			},
			tool: Tool{Kind: "edit", Locations: []ToolLocation{{Path: "/ws/src/a/b.go"}}},
			want: Verdict{Decision: Allow, Rule: "1"},
		},
		{
			name: "options and request fields are reachable",
			policy: PermissionRules{Rules: []PermissionRule{
				compileRule(t, `agent == "codex" && step == "plan" && kind == "permission" && any(options, .kind == "allow_always")`, AllowAlways, ""),
			}},
			tool: Tool{Kind: "edit"},
			want: Verdict{Decision: AllowAlways, Rule: "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &PermissionRequest{
				Request: Request{Agent: "codex", Step: "plan", Workspace: "/ws"},
				Tool:    tt.tool,
				Options: []Option{opt("ao", "allow_once"), opt("aa", "allow_always"), opt("ro", "reject_once")},
			}
			got, err := tt.policy.DecidePermission(context.Background(), req)
			if err != nil || got != tt.want {
				t.Errorf("DecidePermission() = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestARuleWithoutAConditionFailsClosed(t *testing.T) {
	p := &PermissionRules{Rules: []PermissionRule{{Then: Allow}}}
	rec := Answer(context.Background(), p, SourceStep, &PermissionRequest{Options: []Option{opt("ao", "allow_once"), opt("ro", "reject_once")}})
	if rec.Decision != Reject || rec.OptionID != "ro" || rec.Rule != "1" {
		t.Errorf("Answer() = %+v; want reject under rule 1", rec)
	}
}

func TestPermissionRulesUseTheRequestConfigWithoutTheirOwn(t *testing.T) {
	p := &PermissionRules{Rules: []PermissionRule{compileRule(t, `config.mode == "open"`, Allow, "")}}
	req := &PermissionRequest{Config: map[string]any{"mode": "open"}}
	if v, err := p.DecidePermission(context.Background(), req); err != nil || v.Rule != "1" {
		t.Errorf("DecidePermission() = %+v, %v; want rule 1", v, err)
	}
}

func TestPermissionConditionsAreTypeChecked(t *testing.T) {
	tests := []struct {
		name string
		cond string
		want string // part of the error
	}{
		{"a misspelt tool field is named with a suggestion", `tool.kidn == "edit"`, `tool has no field kidn; did you mean "kind"?`},
		{"a misspelt location field is named", `all(tool.locations, .in_worksapce)`, `a location has no field in_worksapce; did you mean "in_workspace"?`},
		{"a misspelt option field is named", `any(options, .knd == "x")`, `an option has no field knd; did you mean "kind"?`},
		{"an unknown top-level name is named with a suggestion", `agnet == "codex"`, `unknown name agnet; did you mean "agent"?`},
		{"the Go field name is not the expression's", `tool.Kind == "edit"`, "tool has no field Kind"},
		{"a comparison of a string with a number is refused", `tool.kind == 1`, "mismatched types string and int"},
		{"a condition that is not a boolean is refused", `tool.kind`, "expected bool"},
		{"a helper with the wrong argument type is refused", `glob(1, tool.title)`, "cannot use int as argument (type string) to call glob"},
		{"a helper with too few arguments is refused", `under(cwd)`, "not enough arguments to call under"},
		{"an env name is not a permission name", `name == "PATH"`, "unknown name name"},
		{"a misspelt helper is named with a suggestion", `glbo("*", tool.title)`, `did you mean "glob"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompilePermissionCondition(tt.cond)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompilePermissionCondition(%q) error = %v; want it to contain %q", tt.cond, err, tt.want)
			}
		})
	}
}

func TestPermissionRulesRuntimeErrorFailsClosed(t *testing.T) {
	tests := []struct {
		name string
		cond string
		req  PermissionRequest
	}{
		{"an index out of range", `tool.locations[0].in_workspace`, PermissionRequest{}},
		{"a helper given a config value that is not a string", `glob(config.pattern, tool.title)`, PermissionRequest{Config: map[string]any{"pattern": 1}}},
		{"a comparison of config values of different types", `config.limit > 3`, PermissionRequest{Config: map[string]any{"limit": "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" rejects under the failing rule", func(t *testing.T) {
			p := &PermissionRules{
				Rules: []PermissionRule{
					compileRule(t, `tool.kind == "read"`, Allow, ""),
					compileRule(t, tt.cond, Reject, ""),
					compileRule(t, `true`, Allow, "a broader rule that must not be reached"),
				},
				Default: Allow,
			}
			req := tt.req
			req.Tool.ID, req.Tool.Kind = "c1", "edit"
			req.Options = []Option{opt("ao", "allow_once"), opt("ro", "reject_once")}
			if _, err := p.DecidePermission(context.Background(), &req); err == nil || !strings.HasPrefix(err.Error(), "rule 2: ") {
				t.Fatalf("DecidePermission() error = %v; want one naming rule 2", err)
			}
			rec := Answer(context.Background(), p, SourceWorkflow, &req)
			if rec.Decision != Reject || rec.OptionID != "ro" || rec.Rule != "2" || !strings.HasPrefix(rec.Reason, "policy error: rule 2: ") {
				t.Errorf("Answer() = %+v; want reject ro under rule 2 with the policy error", rec)
			}
		})
	}
}

func TestPermissionRulesFromJSONRequest(t *testing.T) {
	var req PermissionRequest
	if err := json.Unmarshal(benchRequest, &req); err != nil {
		t.Fatal(err)
	}
	p := &PermissionRules{Rules: append(specRules(t),
		compileRule(t, `any(commands(tool.command), # startsWith "rm ")`, Reject, "rm"))}
	v, err := p.DecidePermission(context.Background(), &req)
	if err != nil || v != (Verdict{Decision: Reject, Rule: "4", Reason: "rm"}) {
		t.Errorf("DecidePermission() = %+v, %v; want reject under rule 4", v, err)
	}
}

func TestPermissionRulesAreSafeForConcurrentUse(t *testing.T) {
	p := &PermissionRules{Rules: specRules(t)}
	kinds := []string{"read", "execute", "edit", "other"}
	want := []string{"1", "default", "3", "default"}
	done := make(chan error)
	for g := range 8 {
		go func() {
			for i := range 200 {
				k := (g + i) % len(kinds)
				req := &PermissionRequest{Tool: Tool{Kind: kinds[k], Command: "make", Locations: []ToolLocation{{InWorkspace: true}}}}
				v, err := p.DecidePermission(context.Background(), req)
				if err != nil || v.Rule != want[k] {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// compileEnvRule compiles an env rule for a test.
func compileEnvRule(t *testing.T, cond string, keep bool) EnvRule {
	t.Helper()
	prog, err := CompileEnvCondition(cond)
	if err != nil {
		t.Fatalf("compile %q: %v", cond, err)
	}
	return &EnvExprRule{If: prog, Keep: keep}
}

func TestEnvExprRules(t *testing.T) {
	amb := map[string]string{
		"PATH":            "/usr/bin",
		"HOME":            "/home/u",
		"EDITOR":          "vi",
		"GH_TOKEN":        "ghp_x",
		"AWS_REGION":      "eu-west-1",
		"AWS_PROFILE":     "dev",
		"ACPFLOW_RUN_DIR": "/var/acpflow",
	}
	ghForCodex := func(t *testing.T) EnvRule { return compileEnvRule(t, `name == "GH_TOKEN" && agent == "codex"`, true) }
	awsButRegion := func(t *testing.T) EnvRule {
		return compileEnvRule(t, `name startsWith "AWS_" && name != "AWS_REGION"`, false)
	}
	tests := []struct {
		name     string
		policy   EnvRules
		agent    string
		explicit map[string]string
		want     []string
	}{
		{
			name:   "a rule keeps GH_TOKEN for codex ahead of the credential rule",
			policy: EnvRules{Inherit: InheritAll, ScrubCredentials: true, Rules: []EnvRule{ghForCodex(t)}},
			agent:  "codex",
			want:   []string{"AWS_PROFILE=dev", "AWS_REGION=eu-west-1", "EDITOR=vi", "GH_TOKEN=ghp_x", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:   "the same rule leaves GH_TOKEN to the credential rule for claude",
			policy: EnvRules{Inherit: InheritAll, ScrubCredentials: true, Rules: []EnvRule{ghForCodex(t)}},
			agent:  "claude",
			want:   []string{"AWS_PROFILE=dev", "AWS_REGION=eu-west-1", "EDITOR=vi", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:   "a drop rule removes what inherit all would keep",
			policy: EnvRules{Inherit: InheritAll, ScrubCredentials: true, Rules: []EnvRule{awsButRegion(t)}},
			agent:  "claude",
			want:   []string{"AWS_REGION=eu-west-1", "EDITOR=vi", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:   "a keep rule adds to inherit core",
			policy: EnvRules{Inherit: InheritCore, ScrubCredentials: true, Rules: []EnvRule{compileEnvRule(t, `name matches "^AWS_"`, true)}},
			agent:  "claude",
			want:   []string{"AWS_PROFILE=dev", "AWS_REGION=eu-west-1", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:   "keep rules are the whole environment under inherit none",
			policy: EnvRules{Inherit: InheritNone, ScrubCredentials: true, Rules: []EnvRule{compileEnvRule(t, `name in ["PATH", "GH_TOKEN"]`, true)}},
			agent:  "claude",
			want:   []string{"GH_TOKEN=ghp_x", "PATH=/usr/bin"},
		},
		{
			name:   "a rule that keeps everything still never passes an ambient ACPFLOW_ variable",
			policy: EnvRules{Inherit: InheritNone, Rules: []EnvRule{compileEnvRule(t, `true`, true)}},
			agent:  "claude",
			want:   []string{"AWS_PROFILE=dev", "AWS_REGION=eu-west-1", "EDITOR=vi", "GH_TOKEN=ghp_x", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:     "explicit values win over a drop rule",
			policy:   EnvRules{Inherit: InheritAll, Rules: []EnvRule{compileEnvRule(t, `true`, false)}},
			agent:    "claude",
			explicit: map[string]string{"PATH": "/opt/bin", "GH_TOKEN": "explicit"},
			want:     []string{"GH_TOKEN=explicit", "PATH=/opt/bin"},
		},
		{
			name: "the first matching env rule wins",
			policy: EnvRules{Inherit: InheritNone, Rules: []EnvRule{
				compileEnvRule(t, `name == "EDITOR"`, false),
				compileEnvRule(t, `value != ""`, true),
			}},
			agent: "claude",
			want:  []string{"AWS_PROFILE=dev", "AWS_REGION=eu-west-1", "GH_TOKEN=ghp_x", "HOME=/home/u", "PATH=/usr/bin"},
		},
		{
			name:   "a rule sees the value",
			policy: EnvRules{Inherit: InheritNone, Rules: []EnvRule{compileEnvRule(t, `value startsWith "/home/"`, true)}},
			agent:  "claude",
			want:   []string{"HOME=/home/u"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &EnvRequest{Request: Request{Agent: tt.agent}, Ambient: amb, Explicit: tt.explicit}
			d, err := tt.policy.DecideEnv(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := EnvList(d.Env); !slices.Equal(got, tt.want) {
				t.Errorf("env = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestEnvExprRuleSeesTheRequestAndConfig(t *testing.T) {
	prog, err := CompileEnvCondition(`kind == "env" && workflow == "w" && run_id == "r" && step == "s" && agent == "a" && workspace == "/ws" && cwd == "/ws/sub" && name in config.keep`)
	if err != nil {
		t.Fatal(err)
	}
	r := &EnvExprRule{If: prog, Keep: true, Config: map[string]any{"keep": []any{"X"}}}
	req := &EnvRequest{Request: Request{Workflow: "w", RunID: "r", Step: "s", Agent: "a", Workspace: "/ws", Cwd: "/ws/sub"}}
	if keep, matched, err := r.Match("X", "1", req); !keep || !matched || err != nil {
		t.Errorf("Match(X) = %t, %t, %v; want keep", keep, matched, err)
	}
	if keep, matched, err := r.Match("Y", "1", req); keep || matched || err != nil {
		t.Errorf("Match(Y) = %t, %t, %v; want no match", keep, matched, err)
	}
}

func TestEnvConditionsAreTypeChecked(t *testing.T) {
	for cond, want := range map[string]string{
		`nmae == "PATH"`:         `unknown name nmae; did you mean "name"?`,
		`tool.kind == "edit"`:    "unknown name tool",
		`name == 1`:              "mismatched types string and int",
		`name startsWith 1`:      "startsWith (mismatched types string and int)",
		`basename(value) + 1`:    "+ (mismatched types string and int)",
		`glob("AWS_*", name, 1)`: "too many arguments to call glob",
	} {
		t.Run(cond+" does not compile", func(t *testing.T) {
			_, err := CompileEnvCondition(cond)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CompileEnvCondition(%q) error = %v; want it to contain %q", cond, err, want)
			}
		})
	}
}

func TestEnvExprRuleRuntimeErrorRefusesTheSpawn(t *testing.T) {
	r := compileEnvRule(t, `glob(config.pattern, name)`, true)
	r.(*EnvExprRule).Config = map[string]any{"pattern": 7}
	d, err := (&EnvRules{Rules: []EnvRule{r}}).DecideEnv(context.Background(), &EnvRequest{Ambient: map[string]string{"PATH": "/bin"}})
	if err == nil || d.Env != nil {
		t.Errorf("DecideEnv() = %+v, %v; want an error and no environment", d, err)
	}
}
