package policies

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

var updateRules = flag.Bool("updateRules", false, "rewrite the expected output of testdata/rules/*.txt")

// fakeWASM stands for a loaded WASM policy: it records what the loader was
// given.
type fakeWASM struct {
	path   string
	kind   string
	config map[string]any
	limits Limits
}

func (f *fakeWASM) DecidePermission(context.Context, *PermissionRequest) (Verdict, error) {
	return Verdict{Decision: Reject, Rule: filepath.Base(f.path)}, nil
}

func (f *fakeWASM) DecideEnv(context.Context, *EnvRequest) (EnvDecision, error) {
	return EnvDecision{Rule: filepath.Base(f.path)}, nil
}

// fakeForm is the wasm form in these tests: it loads every path except
// those named missing*.
type fakeForm struct{}

func (fakeForm) load(kind string, spec FormSpec) (*fakeWASM, error) {
	if strings.HasPrefix(filepath.Base(spec.Path), "missing") {
		return nil, fmt.Errorf("open %s: no such file or directory", spec.Path)
	}
	return &fakeWASM{path: spec.Path, kind: kind, config: spec.Config, limits: spec.Limits}, nil
}

func (f fakeForm) Permission(spec FormSpec) (Permission, error) { return f.load(KindPermission, spec) }
func (f fakeForm) Env(spec FormSpec) (Env, error)               { return f.load(KindEnv, spec) }

// wasmInfo declares the wasm form as policies/wasmpolicy does.
var wasmInfo = FormInfo{Key: "wasm", Label: "WASM", Keys: []string{"limits"}, Schema: json.RawMessage(`{"wasm": {}, "limits": {}}`)}

// fakeForms has fakeForm as the wasm form, and no other.
var fakeForms = formSet{{FormInfo: wasmInfo, form: fakeForm{}}}

const testBaseDir = "/wf"

// TestParseSpecs runs the cases of testdata/rules: each file holds a policy
// specification in YAML, a line "----", and what parsing it gives: the
// policy, rendered by renderPolicy, or the error. Files named permission-*
// are parsed with ParsePermission, env-* with ParseEnv. Run with -updateRules to
// rewrite the expected parts after a deliberate change.
func TestParseSpecs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "rules", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/rules: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(strings.ReplaceAll(name, "-", " "), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(data), "\n----\n")
			if !ok {
				t.Fatalf("%s: no \"----\" line", file)
			}
			var v any
			if err := yaml.Unmarshal([]byte(input), &v); err != nil {
				t.Fatalf("%s: YAML: %v", file, err)
			}
			var policy any
			switch {
			case strings.HasPrefix(name, "permission-"):
				policy, err = parsePermission(v, testBaseDir, fakeForms)
			case strings.HasPrefix(name, "env-"):
				policy, err = parseEnv(v, testBaseDir, fakeForms)
			default:
				t.Fatalf("%s: name it permission-* or env-*", file)
			}
			var got string
			if err != nil {
				var es SpecErrors
				if !errors.As(err, &es) {
					t.Errorf("error %T is not a SpecErrors", err)
				}
				got = "error:\n" + err.Error() + "\n"
			} else {
				got = renderPolicy(t, policy)
			}
			if *updateRules {
				if err := os.WriteFile(file, []byte(input+"\n----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s:\n--- got\n%s--- want\n%s", file, got, want)
			}
		})
	}
}

// renderPolicy writes a parsed policy as the expected part of a case.
func renderPolicy(t *testing.T, policy any) string {
	t.Helper()
	var b strings.Builder
	config := func(m map[string]any) {
		if m != nil {
			j, _ := json.Marshal(m)
			fmt.Fprintf(&b, "config %s\n", j)
		}
	}
	switch p := policy.(type) {
	case Shorthand:
		fmt.Fprintf(&b, "shorthand %s\n", p.Decision)
	case *PermissionRules:
		for i, r := range p.Rules {
			fmt.Fprintf(&b, "rule %d: if %s then %s", i+1, r.If.Source().String(), r.Then)
			if r.Reason != "" {
				fmt.Fprintf(&b, " reason %q", r.Reason)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "default %s\n", p.Default)
		config(p.Config)
	case *EnvRules:
		fmt.Fprintf(&b, "inherit %s\nscrub-credentials %t\n", p.Inherit, p.ScrubCredentials)
		for i, r := range p.Rules {
			er := r.(*EnvExprRule)
			then := "drop"
			if er.Keep {
				then = "keep"
			}
			fmt.Fprintf(&b, "rule %d: if %s then %s\n", i+1, er.If.Source().String(), then)
			if i == 0 {
				config(er.Config)
			}
		}
	case *fakeWASM:
		fmt.Fprintf(&b, "wasm %s %s\n", p.kind, p.path)
		config(p.config)
		fmt.Fprintf(&b, "limits memory=%d timeout=%s\n", p.limits.Memory, p.limits.Timeout)
	default:
		t.Fatalf("unexpected policy %T", policy)
	}
	return b.String()
}

func TestParseWithoutTheWASMPackageRefusesWASM(t *testing.T) {
	spec := map[string]any{"wasm": "p.wasm"}
	const want = `wasm: unknown key "wasm"`
	if _, err := ParsePermission(spec, "/wf"); err == nil || err.Error() != want {
		t.Errorf("ParsePermission(wasm, no form registered) error = %v", err)
	}
	if _, err := ParseEnv(spec, "/wf"); err == nil || err.Error() != want {
		t.Errorf("ParseEnv(wasm, no form registered) error = %v", err)
	}
}

// nilForm makes no policy and says nothing of why.
type nilForm struct{}

func (nilForm) Permission(FormSpec) (Permission, error) { return nil, nil }
func (nilForm) Env(FormSpec) (Env, error)               { return nil, nil }

func TestParseRefusesAFormThatMakesNoPolicy(t *testing.T) {
	forms := formSet{{FormInfo: wasmInfo, form: nilForm{}}}
	if _, err := parsePermission(map[string]any{"wasm": "p.wasm"}, "/wf", forms); err == nil || err.Error() != "wasm: the wasm form made no policy" {
		t.Errorf("ParsePermission() error = %v; want one about the form's result", err)
	}
	if _, err := parseEnv(map[string]any{"wasm": "p.wasm"}, "/wf", forms); err == nil || err.Error() != "wasm: the wasm form made no policy" {
		t.Errorf("ParseEnv() error = %v; want one about the form's result", err)
	}
}

// TestRegisterFormRefusesWhatTheFormatCannotTake covers the registry's
// programming errors, each found at start-up with a message that names
// the form: a key that is no word, a key the file format has already, a
// nil form, and a form registered twice (two packages, or one imported
// under two paths). The registry is left as it was.
func TestRegisterFormRefusesWhatTheFormatCannotTake(t *testing.T) {
	panics := func(info FormInfo, f Form) (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		RegisterForm(info, f)
		return ""
	}
	formsMu.Lock()
	saved := forms
	forms = map[string]registeredForm{"wasm": fakeForms[0]}
	formsMu.Unlock()
	defer func() { formsMu.Lock(); forms = saved; formsMu.Unlock() }()
	tests := []struct {
		name string
		info FormInfo
		form Form
		want string
	}{
		{"an empty key", FormInfo{}, fakeForm{}, `policies: RegisterForm(""): a form's key is a word, as a policy file writes it`},
		{"a key with a dot", FormInfo{Key: "a.b"}, fakeForm{}, `policies: RegisterForm("a.b"): a form's key is a word, as a policy file writes it`},
		{"a key of the format", FormInfo{Key: "rules"}, fakeForm{}, `policies: RegisterForm("rules"): that key is the policy file format's own`},
		{"config", FormInfo{Key: "config"}, fakeForm{}, `policies: RegisterForm("config"): that key is the policy file format's own`},
		{"a nil form", FormInfo{Key: "cel"}, nil, `policies: RegisterForm("cel"): nil form`},
		{"no schema", FormInfo{Key: "cel"}, fakeForm{}, `policies: RegisterForm("cel"): its schema is no JSON object of its keys: unexpected end of JSON input`},
		{"a key the schema lacks", FormInfo{Key: "cel", Keys: []string{"limits"}, Schema: json.RawMessage(`{"cel": {}}`)}, fakeForm{}, `policies: RegisterForm("cel"): its schema has no member "limits"`},
		{"a form registered twice", wasmInfo, fakeForm{}, `policies: the policy form "wasm" registered twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := panics(tt.info, tt.form); got != tt.want {
				t.Errorf("RegisterForm(%q) panic = %q; want %q", tt.info.Key, got, tt.want)
			}
		})
	}
	if got := PermissionSpecKeys(); !slices.Equal(got, []string{"rules", "default", "ask-fallback", "ask-timeout", "unasked", "wasm", "config", "limits"}) {
		t.Errorf("PermissionSpecKeys() = %v; want the base keys, the form's, config and limits", got)
	}
}

// TestTwoFormsInOneMappingAreRefused: a policy is of one form.
func TestTwoFormsInOneMappingAreRefused(t *testing.T) {
	two := append(slices.Clone(fakeForms), registeredForm{FormInfo: FormInfo{Key: "zz"}, form: fakeForm{}})
	_, err := parsePermission(map[string]any{"wasm": "p.wasm", "zz": "q"}, "/wf", two)
	if err == nil || err.Error() != "zz: cannot go with wasm: a wasm policy decides alone" {
		t.Errorf("error = %v", err)
	}
	if got := FilesOf(map[string]any{"wasm": "p.wasm"}); got != nil {
		t.Errorf("FilesOf with no form registered = %v; want none", got)
	}
}

func TestParseResolvesTheWASMPathAgainstTheBaseDir(t *testing.T) {
	tests := []struct{ name, path, want string }{
		{"a relative path is joined to the base dir", "policies/p.wasm", "/wf/policies/p.wasm"},
		{"a relative path may climb out of the base dir", "../shared/p.wasm", "/shared/p.wasm"},
		{"an absolute path is kept", "/opt/p.wasm", "/opt/p.wasm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePermission(map[string]any{"wasm": tt.path}, "/wf", fakeForms)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.(*fakeWASM).path; got != tt.want {
				t.Errorf("path = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestParsedRulesDecide(t *testing.T) {
	var spec any
	if err := yaml.Unmarshal([]byte(`
rules:
  - if: tool.kind in ["read", "search", "think"]
    then: allow
  - if: 'tool.kind == "execute" && any(commands(tool.command), # matches "^(rm|sudo|curl) ")'
    then: reject
    reason: destructive or networked command
  - if: tool.kind == "edit" && all(tool.locations, glob(config.src, .path))
    then: allow
config: {src: "/ws/src/**"}
default: cancel
`), &spec); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePermission(spec, "/wf")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tool Tool
		want Verdict
	}{
		{"a search is allowed", Tool{Kind: "search"}, Verdict{Decision: Allow, Rule: "1"}},
		{"curl piped to sh is rejected", Tool{Kind: "execute", Command: "make; curl x | sh"}, Verdict{Decision: Reject, Rule: "2", Reason: "destructive or networked command"}},
		{"an edit under the configured path is allowed", Tool{Kind: "edit", Locations: []ToolLocation{{Path: "/ws/src/a/b.go"}}}, Verdict{Decision: Allow, Rule: "3"}},
		{"an edit elsewhere gets the default", Tool{Kind: "edit", Locations: []ToolLocation{{Path: "/ws/.git/config"}}}, Verdict{Decision: Cancel, Rule: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := p.DecidePermission(context.Background(), &PermissionRequest{Tool: tt.tool})
			if err != nil || v != tt.want {
				t.Errorf("DecidePermission() = %+v, %v; want %+v", v, err, tt.want)
			}
		})
	}
}

func TestParseMemory(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want uint64
		err  bool
	}{
		{"mebibytes", "64MiB", 64 << 20, false},
		{"kibibytes with a space", "512 KiB", 512 << 10, false},
		{"gibibytes", "1GiB", 1 << 30, false},
		{"megabytes are decimal", "10MB", 10e6, false},
		{"bytes with a unit", "65536B", 65536, false},
		{"bytes as a string", "65536", 65536, false},
		{"bytes as a YAML number", uint64(65536), 65536, false},
		{"bytes as a negative-capable YAML number", int64(65536), 65536, false},
		{"bytes as a JSON number", float64(65536), 65536, false},
		{"the wasm32 maximum", "4GiB", 4 << 30, false},
		{"more than wasm32 can address", "5GiB", 0, true},
		{"zero", 0, 0, true},
		{"less than a page", "65535", 0, true},
		{"a negative number", int64(-1), 0, true},
		{"a fraction", 1.5, 0, true},
		{"an unknown unit", "64 megs", 0, true},
		{"a lowercase unit", "64mib", 0, true},
		{"a boolean", true, 0, true},
		{"an overflowing size", "18446744073709551615GiB", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemory(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseMemory(%#v) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want time.Duration
		err  bool
	}{
		{"seconds", "2s", 2 * time.Second, false},
		{"milliseconds", "500ms", 500 * time.Millisecond, false},
		{"a compound duration", "1m30s", 90 * time.Second, false},
		{"zero", "0s", 0, true},
		{"negative", "-1s", 0, true},
		{"a bare number", uint64(2), 0, true},
		{"no unit", "2", 0, true},
		{"words", "soon", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTimeout(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseTimeout(%#v) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestSpecErrorsKeepTheirPaths(t *testing.T) {
	_, err := ParsePermission(map[string]any{
		"rules": []any{
			map[string]any{"if": "true", "then": "allow"},
			map[string]any{"if": "tool.kidn", "then": "alow"},
		},
		"defualt": "reject",
	}, "/wf")
	var es SpecErrors
	if !errors.As(err, &es) {
		t.Fatalf("error %v is not a SpecErrors", err)
	}
	var paths []string
	for _, e := range es {
		paths = append(paths, e.Path)
	}
	if want := []string{"defualt", "rules[1].if", "rules[1].then"}; !slices.Equal(paths, want) {
		t.Errorf("paths = %q; want %q", paths, want)
	}
}
