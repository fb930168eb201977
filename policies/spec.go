package policies

import (
	"fmt"
	"github.com/acpflow/acpflow/internal/suggest"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/vm"
)

// Limits bounds one WASM policy module (docs/wasm.md): the memory its instance
// may grow to and the time one call may take. A zero field means the
// host's default. The fields are those of wasm.Limits that a workflow file
// may set; parsing keeps Memory between one 64 KiB page and 4 GiB and
// Timeout positive.
type Limits struct {
	Memory  uint64        // bytes
	Timeout time.Duration // per call
}

// Kinds of policy, as Request.Kind names the request.
const (
	KindPermission = "permission"
	KindEnv        = "env"
)

// SpecError is one mistake in a policy specification. Path locates the
// value at fault from the policy's own value: keys joined by ".", list
// indexes (from 0) in brackets, as in `rules[2].then`; it is "" for the
// value itself. The caller, who knows where the value came from, adds the
// file and position.
//
// # Notes
//
// A condition that does not compile has an expr *file.Error as Err (find it
// with errors.As): its Line and Column are within the condition, so the
// caller can point inside it.
type SpecError struct {
	Path string
	Err  error
}

func (e *SpecError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *SpecError) Unwrap() error { return e.Err }

// SpecErrors is every mistake found in one policy specification, in the
// order found: a mapping's unknown keys (sorted) first, then its values.
type SpecErrors []*SpecError

func (es SpecErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

func (es SpecErrors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// Keys each form accepts, in the order they are checked and suggested.
var (
	// permissionBaseKeys and envBaseKeys are this package's; the keys of
	// the registered forms follow them (formSet.keys).
	permissionBaseKeys     = []string{"rules", "default", "ask-fallback", "ask-timeout", "unasked"}
	permissionRuleSpecKeys = []string{"if", "then", "reason"}
	envBaseKeys            = []string{"inherit", "scrub-credentials", "rules"}
	envRuleSpecKeys        = []string{"if", "then"}
	limitsSpecKeys         = []string{"memory", "timeout"}
)

// PermissionSpecKeys is the keys of a permission policy's mapping, the
// registered forms' included, for the workflow schema's own consistency
// test.
func PermissionSpecKeys() []string { return registeredForms().keys(permissionBaseKeys) }

// EnvSpecKeys is the keys of an env policy's mapping, as PermissionSpecKeys.
func EnvSpecKeys() []string { return registeredForms().keys(envBaseKeys) }

var (
	decisionWords = []string{string(Allow), string(AllowAlways), string(Reject), string(RejectAlways), string(Cancel), string(Ask)}
	fallbackWords = decisionWords[:len(decisionWords)-1] // all but ask
	envThenWords  = []string{"keep", "drop"}
	inheritWords  = []string{InheritAll, InheritCore, InheritNone}
)

// ParsePermission builds a permission policy from its specification, the
// decoded YAML value of a `permission:` key (docs/policies.md#permission-policies): a shorthand string
// (any of the five decisions), or a mapping with `rules` (a list of {if, then,
// reason}) and `default`, or with `wasm` (a path relative to baseDir),
// `config` and `limits` ({memory: "64MiB" or bytes, timeout: "2s"}).
// `config` may also go with rules, whose conditions see it as `config`.
// Every condition is compiled here. The wasm form is made by the Form
// registered under its name (RegisterForm); without one, it is an error.
//
// The error, if any, is a SpecErrors listing every mistake found.
//
// # Notes
//
// Parsing is strict: an unknown key is an error (with a suggestion for a
// likely typo), and so is a value of the wrong type, `wasm` with `rules`
// or `default`, and `limits` without `wasm`. The shorthand, `default` and
// each rule's `then` take the same five decisions (docs/policies.md#permission-policies).
func ParsePermission(v any, baseDir string) (Permission, error) {
	return parsePermission(v, baseDir, registeredForms())
}

func parsePermission(v any, baseDir string, forms formSet) (Permission, error) {
	p := &specParser{}
	perm := p.permission(v, baseDir, forms)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return perm, nil
}

// ParseEnv builds an env policy from its specification, the decoded YAML
// value of an `env:` key (docs/policies.md#env-policies): a mapping with `inherit` (all, core,
// none), `scrub-credentials` (a boolean, default true), `rules` (a list of
// {if, then: keep|drop}) and `config`; or with `wasm` (a path relative to
// baseDir), `config` and `limits`, loaded as for ParsePermission.
//
// The error, if any, is a SpecErrors listing every mistake found. Parsing
// is as strict as ParsePermission's; `wasm` replaces inherit,
// scrub-credentials and rules, so it goes with none of them.
func ParseEnv(v any, baseDir string) (Env, error) {
	return parseEnv(v, baseDir, registeredForms())
}

func parseEnv(v any, baseDir string, forms formSet) (Env, error) {
	p := &specParser{}
	env := p.env(v, baseDir, forms)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return env, nil
}

// specParser collects the mistakes of one specification.
type specParser struct {
	errs SpecErrors
}

func (p *specParser) fail(path, format string, args ...any) {
	p.errs = append(p.errs, &SpecError{Path: path, Err: fmt.Errorf(format, args...)})
}

func (p *specParser) failErr(path string, err error) {
	p.errs = append(p.errs, &SpecError{Path: path, Err: err})
}

func (p *specParser) permission(v any, baseDir string, forms formSet) Permission {
	if s, ok := v.(string); ok {
		sh, err := ParseShorthand(s)
		if err != nil {
			p.fail("", "%v%s", err, didYouMean(s, decisionWords))
			return nil
		}
		return sh
	}
	m, ok := p.mapping("", v, forms.keys(permissionBaseKeys), "want reject, allow, cancel, ask or a mapping with rules:"+forms.or())
	if !ok {
		return nil
	}
	perm := p.permissionMapping(m, baseDir, forms)
	if x, ok := m["ask-fallback"]; ok && perm != nil {
		perm = p.askFallback("ask-fallback", perm, x)
	}
	if x, ok := m["ask-timeout"]; ok && perm != nil {
		perm = p.askTimeout("ask-timeout", perm, x)
	}
	if x, ok := m["unasked"]; ok && perm != nil {
		perm = p.unasked("unasked", perm, x)
	}
	return perm
}

// carries reports whether perm already carries the setting T, under any
// other setting: each may be written once per policy.
func carries[T Permission](perm Permission) bool {
	for perm != nil {
		if _, ok := perm.(T); ok {
			return true
		}
		perm = unwrapSetting(perm)
	}
	return false
}

// unasked reads the unasked: setting v at path and wraps perm in it.
func (p *specParser) unasked(path string, perm Permission, v any) Permission {
	s, ok := p.word(path, v, unaskedWords)
	if !ok {
		return perm
	}
	if carries[*WithUnasked](perm) {
		p.fail(path, "unasked is set twice: here and under permission:")
		return perm
	}
	return &WithUnasked{Permission: perm, Unasked: Unasked(s)}
}

// askFallback reads the ask-fallback v at path and wraps perm in it.
func (p *specParser) askFallback(path string, perm Permission, v any) Permission {
	d, ok := p.word(path, v, fallbackWords)
	if !ok {
		return perm
	}
	if carries[*AskFallback](perm) {
		p.fail(path, "ask-fallback is set twice: here and under permission:")
		return perm
	}
	return &AskFallback{Permission: perm, Fallback: Decision(d)}
}

// askTimeout reads the ask-timeout v at path and wraps perm in it.
func (p *specParser) askTimeout(path string, perm Permission, v any) Permission {
	d, err := parseTimeout(v)
	if err != nil {
		p.failErr(path, err)
		return perm
	}
	if carries[*AskTimeout](perm) {
		p.fail(path, "ask-timeout is set twice: here and under permission:")
		return perm
	}
	return &AskTimeout{Permission: perm, Timeout: d}
}

// permissionMapping is the mapping form of a permission policy but its
// ask-fallback.
func (p *specParser) permissionMapping(m map[string]any, baseDir string, forms formSet) Permission {
	if f, ok := forms.in(p, m); ok {
		p.exclusive(m, f.Key, "rules", "default")
		spec, ok := p.form(m, baseDir, f)
		if !ok {
			return nil
		}
		perm, err := f.form.Permission(spec)
		return made(p, f.Key, perm, err)
	}
	p.formOnly(m, forms)
	rules := &PermissionRules{Default: Reject}
	if x, ok := m["default"]; ok {
		if d, ok := p.word("default", x, decisionWords); ok {
			rules.Default = Decision(d)
		}
	}
	if x, ok := m["config"]; ok {
		rules.Config, _ = p.config("config", x)
	}
	if x, ok := m["rules"]; ok {
		for i, item := range p.list("rules", x) {
			path := fmt.Sprintf("rules[%d]", i)
			r, ok := p.mapping(path, item, permissionRuleSpecKeys, "want a mapping with if: and then:")
			if !ok {
				continue
			}
			var rule PermissionRule
			rule.If = p.condition(path, r, CompilePermissionCondition)
			if x, ok := p.required(path, r, "then"); ok {
				if d, ok := p.word(path+".then", x, decisionWords); ok {
					rule.Then = Decision(d)
				}
			}
			if x, ok := r["reason"]; ok {
				rule.Reason, _ = p.str(path+".reason", x)
			}
			rules.Rules = append(rules.Rules, rule)
		}
	}
	return rules
}

func (p *specParser) env(v any, baseDir string, forms formSet) Env {
	m, ok := p.mapping("", v, forms.keys(envBaseKeys), "want a mapping with inherit:, scrub-credentials:, rules:"+forms.or())
	if !ok {
		return nil
	}
	if f, ok := forms.in(p, m); ok {
		p.exclusive(m, f.Key, "inherit", "scrub-credentials", "rules")
		spec, ok := p.form(m, baseDir, f)
		if !ok {
			return nil
		}
		env, err := f.form.Env(spec)
		return made(p, f.Key, env, err)
	}
	p.formOnly(m, forms)
	e := DefaultEnv()
	if x, ok := m["inherit"]; ok {
		if s, ok := p.word("inherit", x, inheritWords); ok {
			e.Inherit = s
		}
	}
	if x, ok := m["scrub-credentials"]; ok {
		b, ok := x.(bool)
		if !ok {
			p.fail("scrub-credentials", "want true or false; got %s", describeValue(x))
		}
		e.ScrubCredentials = b
	}
	var config map[string]any
	if x, ok := m["config"]; ok {
		config, _ = p.config("config", x)
	}
	if x, ok := m["rules"]; ok {
		for i, item := range p.list("rules", x) {
			path := fmt.Sprintf("rules[%d]", i)
			r, ok := p.mapping(path, item, envRuleSpecKeys, "want a mapping with if: and then:")
			if !ok {
				continue
			}
			rule := &EnvExprRule{Config: config}
			rule.If = p.condition(path, r, CompileEnvCondition)
			if x, ok := p.required(path, r, "then"); ok {
				if s, ok := p.word(path+".then", x, envThenWords); ok {
					rule.Keep = s == "keep"
				}
			}
			e.Rules = append(e.Rules, rule)
		}
	}
	return e
}

// form reads the path under the form's key, config and limits; ok is false
// when any is wrong (each mistake reported).
func (p *specParser) form(m map[string]any, baseDir string, f registeredForm) (spec FormSpec, ok bool) {
	name := f.Key
	path, ok := p.str(name, m[name])
	if ok && path == "" {
		p.fail(name, "want the path of a .%s module; got an empty string", name)
		ok = false
	}
	if x, present := m["config"]; present {
		spec.Config, _ = p.config("config", x)
	}
	if x, present := m["limits"]; present && slices.Contains(f.Keys, "limits") {
		spec.Limits = p.limits("limits", x)
	}
	if !ok || len(p.errs) > 0 {
		return spec, false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(baseDir, path)
	}
	spec.Path = path
	return spec, true
}

// made is the policy a form made, or nil with its error reported under the
// form's key.
func made[P any](p *specParser, name string, policy P, err error) P {
	var none P
	switch {
	case err != nil:
		p.failErr(name, err)
		return none
	case any(policy) == nil:
		p.fail(name, "the %s form made no policy", name)
		return none
	}
	return policy
}

// exclusive reports each of others present alongside key.
func (p *specParser) exclusive(m map[string]any, key string, others ...string) {
	for _, o := range others {
		if _, ok := m[o]; ok {
			p.fail(o, "cannot go with %s: a %s policy decides alone", key, key)
		}
	}
}

// mapping checks that v is a mapping whose keys are all in known, reporting
// each unknown key under its own path, and returns it with string keys.
func (p *specParser) mapping(path string, v any, known []string, want string) (map[string]any, bool) {
	var m map[string]any
	switch x := v.(type) {
	case map[string]any:
		m = x
	case map[any]any:
		m = make(map[string]any, len(x))
		for k, val := range x {
			s, ok := k.(string)
			if !ok {
				p.fail(path, "key %v: want a string key", k)
				return nil, false
			}
			m[s] = val
		}
	default:
		p.fail(path, "%s; got %s", want, describeValue(v))
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			p.fail(joinPath(path, k), "unknown key %q%s", k, didYouMean(k, known))
		}
	}
	return m, true
}

// required returns m[key], reporting its absence.
func (p *specParser) required(path string, m map[string]any, key string) (any, bool) {
	x, ok := m[key]
	if !ok {
		p.fail(path, "missing %s:", key)
	}
	return x, ok
}

// condition compiles the `if` of a rule. A YAML boolean (`if: true`) is
// taken as the expression it spells, for a catch-all rule.
func (p *specParser) condition(path string, r map[string]any, compile func(string) (*vm.Program, error)) *vm.Program {
	x, ok := p.required(path, r, "if")
	if !ok {
		return nil
	}
	var src string
	switch c := x.(type) {
	case string:
		src = c
	case bool:
		src = strconv.FormatBool(c)
	default:
		p.fail(path+".if", "want an expression; got %s", describeValue(x))
		return nil
	}
	if strings.TrimSpace(src) == "" {
		p.fail(path+".if", "want an expression; got an empty string")
		return nil
	}
	prog, err := compile(src)
	if err != nil {
		if strings.Contains(err.Error(), "unexpected token EOF") {
			err = fmt.Errorf("%w\n(in YAML, \" #\" starts a comment: quote a condition that uses #)", err)
		}
		p.failErr(path+".if", err)
		return nil
	}
	return prog
}

func (p *specParser) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		p.fail(path, "want a string; got %s", describeValue(v))
	}
	return s, ok
}

// word reads a string that must be one of words.
func (p *specParser) word(path string, v any, words []string) (string, bool) {
	s, ok := v.(string)
	if !ok || !slices.Contains(words, s) {
		got := describeValue(v)
		if ok {
			got = strconv.Quote(s)
		}
		p.fail(path, "want one of %s; got %s%s", strings.Join(words, ", "), got, didYouMean(s, words))
		return "", false
	}
	return s, true
}

func (p *specParser) list(path string, v any) []any {
	l, ok := v.([]any)
	if !ok {
		p.fail(path, "want a list; got %s", describeValue(v))
	}
	return l
}

func (p *specParser) config(path string, v any) (map[string]any, bool) {
	if v == nil {
		return nil, true
	}
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, val := range m {
			s, ok := k.(string)
			if !ok {
				p.fail(path, "key %v: want a string key", k)
				return nil, false
			}
			out[s] = val
		}
		return out, true
	}
	p.fail(path, "want a mapping; got %s", describeValue(v))
	return nil, false
}

// Bounds of a memory limit: one WebAssembly page, and the most a wasm32
// module can address.
const (
	minWASMMemory = 64 << 10
	maxWASMMemory = 4 << 30
)

func (p *specParser) limits(path string, v any) Limits {
	var l Limits
	m, ok := p.mapping(path, v, limitsSpecKeys, "want a mapping with memory: and timeout:")
	if !ok {
		return l
	}
	if x, ok := m["memory"]; ok {
		n, err := parseMemory(x)
		if err != nil {
			p.failErr(path+".memory", err)
		}
		l.Memory = n
	}
	if x, ok := m["timeout"]; ok {
		d, err := parseTimeout(x)
		if err != nil {
			p.failErr(path+".timeout", err)
		}
		l.Timeout = d
	}
	return l
}

// memoryUnits are the suffixes a memory limit may carry.
var memoryUnits = []struct {
	suffix string
	bytes  uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"B", 1},
}

// parseMemory reads a memory limit: a number of bytes, or a string such as
// "64MiB" (units B, KiB, MiB, GiB, KB, MB, GB).
func parseMemory(v any) (uint64, error) {
	var n uint64
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		unit := uint64(1)
		for _, u := range memoryUnits {
			if rest, ok := strings.CutSuffix(s, u.suffix); ok {
				s, unit = strings.TrimSpace(rest), u.bytes
				break
			}
		}
		q, err := strconv.ParseUint(s, 10, 64)
		if err != nil || q > math.MaxUint64/unit {
			return 0, fmt.Errorf("want bytes or a size such as \"64MiB\" (units B, KiB, MiB, GiB, KB, MB, GB); got %q", x)
		}
		n = q * unit
	default:
		i, ok := wholeNumber(v)
		if !ok || i < 0 {
			return 0, fmt.Errorf("want bytes or a size such as \"64MiB\"; got %s", describeValue(v))
		}
		n = uint64(i)
	}
	switch {
	case n < minWASMMemory:
		return 0, fmt.Errorf("%d bytes is less than one WebAssembly page (64KiB)", n)
	case n > maxWASMMemory:
		return 0, fmt.Errorf("%d bytes is more than a wasm32 module can address (4GiB)", n)
	}
	return n, nil
}

// parseTimeout reads a per-call time limit: a Go duration string.
func parseTimeout(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration such as \"2s\" or \"500ms\"; got %s", describeValue(v))
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("want a duration such as \"2s\" or \"500ms\"; got %q", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be more than 0; got %q", s)
	}
	return d, nil
}

// wholeNumber accepts the integer types YAML and JSON decoders produce, and
// floats without a fraction.
func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// describeValue names the kind of a decoded value, for "want X; got Y".
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if _, ok := wholeNumber(v); ok {
		return fmt.Sprintf("the number %v", v)
	}
	if _, ok := v.(float64); ok {
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("a %T", v)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// didYouMean is the tail of a "want …; got …" message: a suggestion when a
// known word is close enough to be the one meant.
func didYouMean(word string, known []string) string {
	if s := suggest.Closest(word, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}
