package policies

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// ambient is a small but typical environment of acpflow itself.
func ambient() map[string]string {
	return map[string]string{
		"PATH":              "/usr/bin:/bin",
		"HOME":              "/home/u",
		"USER":              "u",
		"LANG":              "C.UTF-8",
		"LC_ALL":            "C.UTF-8",
		"TERM":              "xterm",
		"TZ":                "UTC",
		"EDITOR":            "vi",
		"HTTPS_PROXY":       "http://proxy:3128",
		"GIT_AUTHOR_NAME":   "U",
		"ANTHROPIC_API_KEY": "sk-ambient",
		"GITHUB_TOKEN":      "ghp_ambient",
		"DATABASE_URL":      "postgres://u:pw@db/app",
		"ACPFLOW_RUN_DIR":   "/var/acpflow",
		"ACPFLOW_DEBUG":     "1",
	}
}

func TestDefaultEnv(t *testing.T) {
	e := DefaultEnv()
	if e.Inherit != InheritAll || !e.ScrubCredentials || len(e.Rules) != 0 {
		t.Errorf("DefaultEnv() = %+v; want inherit all, scrub credentials, no rules", e)
	}
}

func TestEnvRulesDecideEnv(t *testing.T) {
	tests := []struct {
		name     string
		rules    EnvRules
		ambient  map[string]string
		explicit map[string]string
		want     []string // the complete environment, sorted
		wantRule string
	}{
		{
			name:     "the default keeps ordinary variables and drops credentials and ACPFLOW_ settings",
			rules:    *DefaultEnv(),
			ambient:  ambient(),
			want:     []string{"EDITOR=vi", "GIT_AUTHOR_NAME=U", "HOME=/home/u", "HTTPS_PROXY=http://proxy:3128", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin", "TERM=xterm", "TZ=UTC", "USER=u"},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "an explicit ACPFLOW_ variable passes although ambient ones are dropped",
			rules:    *DefaultEnv(),
			ambient:  map[string]string{"ACPFLOW_DEBUG": "1", "PATH": "/bin"},
			explicit: map[string]string{"ACPFLOW_STEP": "plan"},
			want:     []string{"ACPFLOW_STEP=plan", "PATH=/bin"},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "ambient ACPFLOW_ variables are dropped even with scrubbing off",
			rules:    EnvRules{Inherit: InheritAll},
			ambient:  map[string]string{"ACPFLOW_DEBUG": "1", "GITHUB_TOKEN": "t"},
			want:     []string{"GITHUB_TOKEN=t"},
			wantRule: "inherit=all",
		},
		{
			name:     "the ACPFLOW_ prefix is matched in upper case only, as the name is spelt",
			rules:    EnvRules{Inherit: InheritAll},
			ambient:  map[string]string{"acpflow_x": "1", "ACPFLOWX": "2"},
			want:     []string{"ACPFLOWX=2", "acpflow_x=1"},
			wantRule: "inherit=all",
		},
		{
			name:     "scrubbing off passes ambient credentials",
			rules:    EnvRules{Inherit: InheritAll, ScrubCredentials: false},
			ambient:  map[string]string{"ANTHROPIC_API_KEY": "sk", "DATABASE_URL": "pg", "PATH": "/bin"},
			want:     []string{"ANTHROPIC_API_KEY=sk", "DATABASE_URL=pg", "PATH=/bin"},
			wantRule: "inherit=all",
		},
		{
			name:     "an empty inherit means all",
			rules:    EnvRules{ScrubCredentials: true},
			ambient:  map[string]string{"EDITOR": "vi", "GH_TOKEN": "t"},
			want:     []string{"EDITOR=vi"},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "inherit core keeps only the core variables and still scrubs",
			rules:    EnvRules{Inherit: InheritCore, ScrubCredentials: true},
			ambient:  ambient(),
			want:     []string{"HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin", "TERM=xterm", "TZ=UTC", "USER=u"},
			wantRule: "inherit=core,scrub-credentials",
		},
		{
			name:     "inherit core keeps every core name and LC_ variable",
			rules:    EnvRules{Inherit: InheritCore},
			ambient:  map[string]string{"PATH": "p", "HOME": "h", "USER": "u", "LOGNAME": "l", "SHELL": "s", "LANG": "C", "LC_CTYPE": "C", "LC_TIME": "C", "TERM": "t", "TMPDIR": "/tmp", "TZ": "UTC", "LANGUAGE": "en", "EDITOR": "vi", "lc_all": "C"},
			want:     []string{"HOME=h", "LANG=C", "LC_CTYPE=C", "LC_TIME=C", "LOGNAME=l", "PATH=p", "SHELL=s", "TERM=t", "TMPDIR=/tmp", "TZ=UTC", "USER=u"},
			wantRule: "inherit=core",
		},
		{
			name:     "inherit none passes only the explicit values",
			rules:    EnvRules{Inherit: InheritNone, ScrubCredentials: true},
			ambient:  ambient(),
			explicit: map[string]string{"PATH": "/opt/bin", "FOO": "bar"},
			want:     []string{"FOO=bar", "PATH=/opt/bin"},
			wantRule: "inherit=none,scrub-credentials",
		},
		{
			name:     "inherit none with nothing explicit gives an empty environment",
			rules:    EnvRules{Inherit: InheritNone},
			ambient:  ambient(),
			want:     []string{},
			wantRule: "inherit=none",
		},
		{
			name:     "an explicit credential arrives although scrubbing drops the ambient one",
			rules:    *DefaultEnv(),
			ambient:  map[string]string{"ANTHROPIC_API_KEY": "sk-ambient"},
			explicit: map[string]string{"ANTHROPIC_API_KEY": "sk-explicit"},
			want:     []string{"ANTHROPIC_API_KEY=sk-explicit"},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "an explicit value wins over the ambient one",
			rules:    *DefaultEnv(),
			ambient:  map[string]string{"PATH": "/usr/bin", "HOME": "/home/u"},
			explicit: map[string]string{"PATH": "/opt/bin"},
			want:     []string{"HOME=/home/u", "PATH=/opt/bin"},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "an explicit empty value is set, not dropped",
			rules:    *DefaultEnv(),
			ambient:  map[string]string{"TERM": "xterm"},
			explicit: map[string]string{"TERM": ""},
			want:     []string{"TERM="},
			wantRule: "inherit=all,scrub-credentials",
		},
		{
			name:     "no ambient environment at all is fine",
			rules:    *DefaultEnv(),
			explicit: map[string]string{"A": "1"},
			want:     []string{"A=1"},
			wantRule: "inherit=all,scrub-credentials",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &EnvRequest{Request: Request{Kind: "env"}, Ambient: tt.ambient, Explicit: tt.explicit}
			d, err := tt.rules.DecideEnv(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := EnvList(d.Env); !slices.Equal(got, tt.want) {
				t.Errorf("env =\n  %q\nwant\n  %q", got, tt.want)
			}
			if d.Rule != tt.wantRule || d.Deny != "" {
				t.Errorf("rule, deny = %q, %q; want %q, \"\"", d.Rule, d.Deny, tt.wantRule)
			}
		})
	}
}

func TestEnvRulesDecideEnvDoesNotChangeTheRequest(t *testing.T) {
	amb, exp := ambient(), map[string]string{"X": "1"}
	req := &EnvRequest{Ambient: maps.Clone(amb), Explicit: maps.Clone(exp)}
	d, err := DefaultEnv().DecideEnv(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	d.Env["PATH"] = "changed"
	if !maps.Equal(req.Ambient, amb) || !maps.Equal(req.Explicit, exp) {
		t.Error("DecideEnv changed the request's maps, or returned one of them")
	}
}

func TestEnvRulesRejectsAnUnknownInherit(t *testing.T) {
	for _, inherit := range []string{"All", "some", "minimal"} {
		t.Run("inherit "+inherit+" is an error that lists the accepted values", func(t *testing.T) {
			_, err := (&EnvRules{Inherit: inherit}).DecideEnv(context.Background(), &EnvRequest{})
			if err == nil || !strings.Contains(err.Error(), "all, core or none") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// ruleFunc adapts a function to EnvRule for tests.
type ruleFunc func(name, value string, req *EnvRequest) (keep, matched bool, err error)

func (f ruleFunc) Match(name, value string, req *EnvRequest) (bool, bool, error) {
	return f(name, value, req)
}

// keepNamed matches one name and keeps or drops it.
func keepNamed(name string, keep bool) EnvRule {
	return ruleFunc(func(n, _ string, _ *EnvRequest) (bool, bool, error) { return keep, n == name, nil })
}

func TestEnvRulesPerVariableRules(t *testing.T) {
	amb := map[string]string{"PATH": "/bin", "GH_TOKEN": "t", "AWS_REGION": "eu", "AWS_PROFILE": "p", "ACPFLOW_X": "1"}
	tests := []struct {
		name     string
		rules    EnvRules
		want     []string
		wantRule string
	}{
		{
			name:     "a rule that keeps a credential overrides scrubbing",
			rules:    EnvRules{Inherit: InheritAll, ScrubCredentials: true, Rules: []EnvRule{keepNamed("GH_TOKEN", true)}},
			want:     []string{"AWS_PROFILE=p", "AWS_REGION=eu", "GH_TOKEN=t", "PATH=/bin"},
			wantRule: "rules(1),inherit=all,scrub-credentials",
		},
		{
			name:     "a rule that keeps a variable overrides inherit none",
			rules:    EnvRules{Inherit: InheritNone, Rules: []EnvRule{keepNamed("AWS_REGION", true)}},
			want:     []string{"AWS_REGION=eu"},
			wantRule: "rules(1),inherit=none",
		},
		{
			name:     "a rule that drops a variable overrides inherit all",
			rules:    EnvRules{Inherit: InheritAll, ScrubCredentials: true, Rules: []EnvRule{keepNamed("AWS_PROFILE", false)}},
			want:     []string{"AWS_REGION=eu", "PATH=/bin"},
			wantRule: "rules(1),inherit=all,scrub-credentials",
		},
		{
			name:     "the first matching rule wins",
			rules:    EnvRules{Inherit: InheritAll, Rules: []EnvRule{keepNamed("PATH", false), keepNamed("PATH", true)}},
			want:     []string{"AWS_PROFILE=p", "AWS_REGION=eu", "GH_TOKEN=t"},
			wantRule: "rules(2),inherit=all",
		},
		{
			name:     "no rule can keep an ambient ACPFLOW_ variable",
			rules:    EnvRules{Inherit: InheritNone, Rules: []EnvRule{keepNamed("ACPFLOW_X", true)}},
			want:     []string{},
			wantRule: "rules(1),inherit=none",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.rules.DecideEnv(context.Background(), &EnvRequest{Ambient: amb})
			if err != nil {
				t.Fatal(err)
			}
			if got := EnvList(d.Env); !slices.Equal(got, tt.want) || d.Rule != tt.wantRule {
				t.Errorf("env, rule = %q, %q\nwant %q, %q", got, d.Rule, tt.want, tt.wantRule)
			}
		})
	}
}

func TestEnvRulesRuleSeesNameValueAndRequest(t *testing.T) {
	req := &EnvRequest{Request: Request{Agent: "codex"}, Ambient: map[string]string{"GH_TOKEN": "t"}}
	var seen []string
	rule := ruleFunc(func(name, value string, r *EnvRequest) (bool, bool, error) {
		seen = append(seen, name+"="+value+"@"+r.Agent)
		return false, false, nil
	})
	if _, err := (&EnvRules{Rules: []EnvRule{rule}}).DecideEnv(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"GH_TOKEN=t@codex"}) {
		t.Errorf("rule saw %q", seen)
	}
}

func TestEnvRulesFailingRuleFailsClosed(t *testing.T) {
	boom := errors.New("expr: bad type")
	rule := ruleFunc(func(string, string, *EnvRequest) (bool, bool, error) { return true, true, boom })
	d, err := (&EnvRules{Rules: []EnvRule{rule}}).DecideEnv(context.Background(), &EnvRequest{Ambient: map[string]string{"PATH": "/bin"}})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "PATH") {
		t.Errorf("err = %v; want it to wrap the rule's error and name the variable", err)
	}
	if d.Env != nil {
		t.Errorf("a failed decision returned an environment: %v", d.Env)
	}
}

func TestEnvList(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"names are sorted bytewise", map[string]string{"b": "2", "A": "1", "B": "3"}, []string{"A=1", "B=3", "b=2"}},
		{"values keep their = signs and spaces", map[string]string{"X": "a=b c"}, []string{"X=a=b c"}},
		{"an empty value is written as NAME=", map[string]string{"E": ""}, []string{"E="}},
		{"an empty map gives an empty, non-nil list", map[string]string{}, []string{}},
		{"a nil map gives an empty, non-nil list", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EnvList(tt.env)
			if got == nil || !slices.Equal(got, tt.want) {
				t.Errorf("EnvList() = %#v, want %q", got, tt.want)
			}
		})
	}
}

func TestEnvMap(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    map[string]string
	}{
		{"each entry splits at its first =", []string{"A=1", "B=x=y"}, map[string]string{"A": "1", "B": "x=y"}},
		{"an empty value is kept", []string{"E="}, map[string]string{"E": ""}},
		{"entries without = are skipped", []string{"JUNK", "", "A=1"}, map[string]string{"A": "1"}},
		{"a later duplicate wins", []string{"A=1", "A=2"}, map[string]string{"A": "2"}},
		{"a Windows drive entry keeps its leading =", []string{`=C:=C:\dir`}, map[string]string{"=C:": `C:\dir`}},
		{"a lone = is skipped", []string{"="}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EnvMap(tt.environ); !maps.Equal(got, tt.want) {
				t.Errorf("EnvMap(%q) = %q, want %q", tt.environ, got, tt.want)
			}
		})
	}
}

func TestEnvMapAndEnvListRoundTrip(t *testing.T) {
	env := map[string]string{"PATH": "/bin", "X": "a=b", "E": ""}
	if got := EnvMap(EnvList(env)); !maps.Equal(got, env) {
		t.Errorf("round trip = %q, want %q", got, env)
	}
}

type panickingEnv struct{}

func (panickingEnv) DecideEnv(context.Context, *EnvRequest) (EnvDecision, error) { panic("boom") }

func TestBuildEnvFailsClosedOnAPanicAndDefaultsANilPolicy(t *testing.T) {
	req := &EnvRequest{Ambient: map[string]string{"PATH": "/bin", "OPENAI_API_KEY": "sk"}}
	if _, err := BuildEnv(context.Background(), panickingEnv{}, req); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panicking policy gave err = %v", err)
	}
	dec, err := BuildEnv(context.Background(), nil, req)
	if err != nil || dec.Env["PATH"] != "/bin" || dec.Env["OPENAI_API_KEY"] != "" {
		t.Errorf("the default policy gave %v, %v", dec.Env, err)
	}
}
