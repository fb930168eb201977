package policies

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/acpflow/acpflow/internal/exprguard"
)

// permissionEnv is the expr environment of a permission rule: the request of
// docs/policies.md#permission-policies under its snake_case names. It is a struct, not a map, so that
// the checker knows every name and type when the policy is loaded: a typo
// such as `tool.kidn` or a comparison of a string with a number is an error
// then, not a surprise at the first permission request.
type permissionEnv struct {
	exprguard.Meter `expr:"-"` // bounds what one decision's conditions build
	Request
	Tool    toolEnv        `expr:"tool"`
	Options []optionEnv    `expr:"options"`
	Config  map[string]any `expr:"config"`
}

type toolEnv struct {
	ID        string        `expr:"id"`
	Kind      string        `expr:"kind"`
	Title     string        `expr:"title"`
	Status    string        `expr:"status"`
	RawInput  any           `expr:"raw_input"`
	Command   string        `expr:"command"`
	Locations []locationEnv `expr:"locations"`
}

type locationEnv struct {
	Path        string `expr:"path"`
	Line        int    `expr:"line"`
	InWorkspace bool   `expr:"in_workspace"`
}

type optionEnv struct {
	ID   string `expr:"id"`
	Name string `expr:"name"`
	Kind string `expr:"kind"`
}

// envVarEnv is the expr environment of an env rule: one ambient variable
// and the request of docs/policies.md#env-policies.
type envVarEnv struct {
	exprguard.Meter `expr:"-"`
	Request
	Name   string         `expr:"name"`
	Value  string         `expr:"value"`
	Config map[string]any `expr:"config"`
}

// CompilePermissionCondition compiles the `if` of a permission rule against
// the typed request of docs/policies.md#permission-policies, with the rule helpers (glob, under,
// commands, basename). The result must be a boolean.
//
// # Notes
//
// Compiling costs tens of microseconds; evaluating, well under one. Compile
// once, when the policy is loaded, and keep the program.
func CompilePermissionCondition(src string) (*vm.Program, error) {
	return compileCondition(src, permissionEnv{})
}

// CompileEnvCondition compiles the `if` of an env rule against the typed
// environment of docs/policies.md#env-policies: name, value, the request fields and config.
func CompileEnvCondition(src string) (*vm.Program, error) {
	return compileCondition(src, envVarEnv{})
}

func compileCondition(src string, env any) (*vm.Program, error) {
	opts := make([]expr.Option, 0, 2+len(helperFunctions))
	opts = append(opts, expr.Env(env), expr.AsBool())
	opts = append(opts, helperFunctions...)
	// Compiled as the engine's expressions are: string growth is bounded
	// (internal/exprguard), so a rule cannot exhaust memory at decision time.
	prog, err := exprguard.Compile(src, exprguard.NewConfig(opts...))
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			fe.Message = explainCompileError(fe.Message, reflect.TypeOf(env))
		}
		return nil, err
	}
	return prog, nil
}

// envTypeNames are what a compile error calls the typed environments, in
// place of their Go names, which mean nothing to the author of a rule.
var envTypeNames = map[reflect.Type]string{
	reflect.TypeFor[permissionEnv](): "the request",
	reflect.TypeFor[envVarEnv]():     "the request",
	reflect.TypeFor[toolEnv]():       "tool",
	reflect.TypeFor[locationEnv]():   "a location",
	reflect.TypeFor[optionEnv]():     "an option",
}

var (
	noFieldPattern     = regexp.MustCompile(`^type (\S+) has no field (\w+)$`)
	unknownNamePattern = regexp.MustCompile(`^unknown name (\w+)$`)
)

// explainCompileError rewrites expr's message about a name the environment
// lacks in the words of the rule's author: the environment's own names for
// its parts, and the closest existing field as a suggestion.
func explainCompileError(msg string, env reflect.Type) string {
	if m := unknownNamePattern.FindStringSubmatch(msg); m != nil {
		return msg + didYouMean(m[1], append(exprFieldNames(env), helperNames...))
	}
	m := noFieldPattern.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	for t, name := range envTypeNames {
		if t.String() == m[1] {
			return fmt.Sprintf("%s has no field %s%s", name, m[2], didYouMean(m[2], exprFieldNames(t)))
		}
	}
	return msg
}

// exprFieldNames lists the names a struct's fields have in expressions,
// those of an embedded struct (Request) included.
func exprFieldNames(t reflect.Type) []string {
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		if f.Anonymous {
			names = append(names, exprFieldNames(f.Type)...)
		} else if name := f.Tag.Get("expr"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// vms holds evaluators between calls: a vm.VM keeps its stack, so reusing
// one spares the allocations of a fresh one on every decision. A VM is
// not safe for concurrent use; the pool gives each caller its own.
var vms = sync.Pool{New: func() any { return new(vm.VM) }}

// evalCondition runs a compiled condition on env (a pointer to one of the
// typed environments above).
func evalCondition(p *vm.Program, env any) (bool, error) {
	if p == nil {
		return false, errors.New("rule has no condition")
	}
	machine := vms.Get().(*vm.VM)
	out, err := machine.Run(p, env)
	vms.Put(machine)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		// expr.AsBool makes the checker refuse anything else; this guards
		// against a program compiled elsewhere.
		return false, fmt.Errorf("condition gave %T, want a boolean", out)
	}
	return b, nil
}

// PermissionRule is one rule of the `permission: rules:` form: when If
// holds, the policy decides Then.
type PermissionRule struct {
	If     *vm.Program // from CompilePermissionCondition
	Then   Decision
	Reason string // recorded with the decision; may be empty
}

// PermissionRules is the expr-rules permission policy (docs/policies.md#permission-policies): the
// first rule whose condition holds decides; when none does, Default does.
type PermissionRules struct {
	Rules   []PermissionRule
	Default Decision       // when no rule matches; "" means Reject
	Config  map[string]any // what `config` holds in conditions; nil: the request's Config
}

var _ Permission = (*PermissionRules)(nil)

// DecidePermission evaluates the rules in order on req. The first that
// holds gives Verdict{Then, rule index from 1, Reason}; when none holds the
// verdict is Default under the rule "default".
//
// # Notes
//
// A condition that fails at run time (a helper given a non-string config
// value, an index out of range) is an error, not a non-match: skipping it
// could let a later, broader rule allow what this one was written to stop.
// Answer turns the error into a rejection, recorded under the failing rule.
// Locations' in_workspace is taken from req as given: the ACP client
// computes it with InWorkspace when the request arrives.
func (p *PermissionRules) DecidePermission(_ context.Context, req *PermissionRequest) (Verdict, error) {
	env := newPermissionEnv(req, p.Config)
	for i := range p.Rules {
		r := &p.Rules[i]
		ok, err := evalCondition(r.If, env)
		if err != nil {
			return Verdict{Rule: strconv.Itoa(i + 1)}, fmt.Errorf("rule %d: %w", i+1, err)
		}
		if ok {
			return Verdict{Decision: r.Then, Rule: strconv.Itoa(i + 1), Reason: r.Reason}, nil
		}
	}
	d := p.Default
	if d == "" {
		d = Reject
	}
	return Verdict{Decision: d, Rule: "default"}, nil
}

// newPermissionEnv copies req into the typed environment: plain field
// copies, and one small slice each for locations and options.
func newPermissionEnv(req *PermissionRequest, config map[string]any) *permissionEnv {
	if config == nil {
		config = req.Config
	}
	env := &permissionEnv{
		Request: req.Request,
		Tool: toolEnv{
			ID:       req.Tool.ID,
			Kind:     req.Tool.Kind,
			Title:    req.Tool.Title,
			Status:   req.Tool.Status,
			RawInput: req.Tool.RawInput,
			Command:  req.Tool.Command,
		},
		Config: config,
	}
	if env.Kind == "" {
		env.Kind = KindPermission
	}
	if n := len(req.Tool.Locations); n > 0 {
		env.Tool.Locations = make([]locationEnv, n)
		for i, l := range req.Tool.Locations {
			env.Tool.Locations[i] = locationEnv(l)
		}
	}
	if n := len(req.Options); n > 0 {
		env.Options = make([]optionEnv, n)
		for i, o := range req.Options {
			env.Options[i] = optionEnv(o)
		}
	}
	return env
}

// EnvExprRule is one rule of the `env: rules:` form, an EnvRule: when If
// holds for an ambient variable, the child gets it (Keep) or not.
type EnvExprRule struct {
	If     *vm.Program    // from CompileEnvCondition
	Keep   bool           // then: keep (true) or drop (false)
	Config map[string]any // what `config` holds in the condition
}

var _ EnvRule = (*EnvExprRule)(nil)

// Match evaluates the rule on one ambient variable. A condition that fails
// at run time is an error, so the spawn is refused (fail closed).
func (r *EnvExprRule) Match(name, value string, req *EnvRequest) (keep, matched bool, err error) {
	env := &envVarEnv{Request: req.Request, Name: name, Value: value, Config: r.Config}
	if env.Kind == "" {
		env.Kind = KindEnv
	}
	ok, err := evalCondition(r.If, env)
	if err != nil {
		return false, false, scrubEnv(err, value, req)
	}
	if !ok {
		return false, false, nil
	}
	return r.Keep, true, nil
}

// scrubEnv takes the values of the environment out of a rule's error
// (exprguard.Scrub): expr's run-time errors quote the value they failed on,
// and an env rule's error ends up in the step's error, the terminal and the
// run store, where a variable the credential rule drops must never be seen.
func scrubEnv(err error, value string, req *EnvRequest) error {
	values := make([]string, 0, 1+len(req.Ambient)+len(req.Explicit))
	values = append(values, value)
	for _, v := range req.Ambient {
		values = append(values, v)
	}
	for _, v := range req.Explicit {
		values = append(values, v)
	}
	msg := err.Error()
	if clean := exprguard.Scrub(msg, values); clean != msg {
		return errors.New(clean)
	}
	return err
}
