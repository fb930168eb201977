package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/acpflow/acpflow/internal/exprguard"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// Expr is a compiled expr-lang expression (`if:`, `for-each:`, and each
// ${{ }} of a template). Compilation happens once, at load time.
type Expr struct {
	Source  string
	program *vm.Program
}

// Template is a string with ${{ }} parts. A template with no parts is a
// literal.
type Template struct {
	Source string
	parts  []templatePart
}

type templatePart struct {
	literal string
	expr    *Expr // nil for a literal part
}

// Ref is a reference an expression makes to an input or a step
// (`inputs.task`, `steps.plan.output`), for validation.
type Ref struct {
	Root  string // "inputs", "steps" or "env"
	Name  string
	Field string // for steps: output, final, stop_reason, status, json; "" if not accessed
}

// ScopeNames are the names an expression may use at the top level.
var ScopeNames = []string{"inputs", "env", "steps", "run", "workflow", "item", "index"}

// Scope is what expressions see, both when they are checked at load time
// and when they run: the top-level names are fixed and typed, their members
// are dynamic. Item is `any`, so that `item.name` and `item + 1` both
// compile: its type is only known when the for-each list is.
type Scope struct {
	// meter bounds what one evaluation builds; Eval gives each evaluation
	// its own copy of the scope, and so its own meter.
	exprguard.Meter `expr:"-"`

	Inputs   map[string]any `expr:"inputs"`
	Env      map[string]any `expr:"env"`
	Steps    map[string]any `expr:"steps"`
	Run      map[string]any `expr:"run"`
	Workflow map[string]any `expr:"workflow"`
	Item     any            `expr:"item"`
	Index    int            `expr:"index"`
}

// compiler holds one expr configuration for every compile: building it is
// most of what expr.Compile costs (13 µs of 17 µs), and a workflow has
// hundreds of expressions. A configuration is not safe for concurrent
// compiles, hence the lock; loading a workflow is single-threaded anyway.
var compiler = struct {
	sync.Mutex
	config *conf.Config
}{config: newCompileConfig()}

func newCompileConfig() *conf.Config {
	return exprguard.NewConfig(expr.Env(Scope{}))
}

// CompileExpr compiles a bare expression, with the growing operations
// guarded (internal/exprguard).
func CompileExpr(src string) (*Expr, error) {
	compiler.Lock()
	defer compiler.Unlock()
	p, err := exprguard.Compile(src, compiler.config)
	if err != nil {
		return nil, err
	}
	return &Expr{Source: src, program: p}, nil
}

// Eval evaluates the expression in scope.
//
// # Notes
//
// The error never shows a value of env: expr's run-time errors quote the
// value they failed on (`int(env.TOKEN)` says `parsing "…"`), and env
// holds the engine's whole environment, secrets included.
func (e *Expr) Eval(scope *Scope) (any, error) {
	own := *scope // a meter of its own: scopes are shared between evaluations
	own.Meter = exprguard.Meter{}
	v, err := expr.Run(e.program, &own)
	if err != nil {
		return nil, scope.scrub(fmt.Errorf("%s: %w", e.Source, err))
	}
	return v, nil
}

// Bool evaluates an `if:`: it must yield a boolean.
func (e *Expr) Bool(scope *Scope) (bool, error) {
	v, err := e.Eval(scope)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, scope.scrub(fmt.Errorf("%s: want a boolean, got %s", e.Source, describe(v)))
	}
	return b, nil
}

// scrub takes every value of env out of an error (exprguard.Scrub).
func (s *Scope) scrub(err error) error {
	if err == nil || len(s.Env) == 0 {
		return err
	}
	values := make([]string, 0, len(s.Env))
	for _, v := range s.Env {
		if str, ok := v.(string); ok {
			values = append(values, str)
		}
	}
	msg := err.Error()
	if clean := exprguard.Scrub(msg, values); clean != msg {
		return errors.New(clean)
	}
	return err
}

// Refs lists the inputs, steps and environment variables the expression
// refers to by name.
func (e *Expr) Refs() []Ref {
	var v refCollector
	node := e.program.Node()
	ast.Walk(&node, &v)
	return v.refs
}

type refCollector struct{ refs []Ref }

// Visit finds `inputs.x`, `env.X`, `steps.x` and `steps.x.field` (dot or bracket
// form with a constant key). ast.Walk visits children first, so the
// outermost member node of a chain comes last and may refine a shorter ref.
func (v *refCollector) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok {
		return
	}
	name, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	switch base := m.Node.(type) {
	case *ast.IdentifierNode:
		if base.Value == "inputs" || base.Value == "steps" || base.Value == "env" {
			v.refs = append(v.refs, Ref{Root: base.Value, Name: name.Value})
		}
	case *ast.MemberNode:
		id, ok := base.Node.(*ast.IdentifierNode)
		inner, ok2 := base.Property.(*ast.StringNode)
		if ok && ok2 && id.Value == "steps" {
			for i := range v.refs {
				if r := &v.refs[i]; r.Root == "steps" && r.Name == inner.Value && r.Field == "" {
					r.Field = name.Value
				}
			}
		}
	}
}

// TestedEnv lists the environment variables whose being unset the
// expression itself handles: it gives them a default (`env.X ?? "d"`) or
// compares them with nil (`env.X == nil`, `env.X != nil`). A warning that
// X is not set would only be noise there. A comparison with "" is not
// one: an unset variable is nil in an expression, and nil == "" is false.
func (e *Expr) TestedEnv() map[string]bool {
	var v envTests
	node := e.program.Node()
	ast.Walk(&node, &v)
	return v.names
}

type envTests struct{ names map[string]bool }

func (v *envTests) Visit(node *ast.Node) {
	n, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	switch n.Operator {
	case "??":
		v.add(n.Left)
	case "==", "!=":
		if _, isNil := n.Right.(*ast.NilNode); isNil {
			v.add(n.Left)
		}
		if _, isNil := n.Left.(*ast.NilNode); isNil {
			v.add(n.Right)
		}
	}
}

// add records the name of an env.NAME (or env["NAME"]) node.
func (v *envTests) add(operand ast.Node) {
	m, ok := operand.(*ast.MemberNode)
	if !ok {
		return
	}
	base, ok := m.Node.(*ast.IdentifierNode)
	name, ok2 := m.Property.(*ast.StringNode)
	if ok && ok2 && base.Value == "env" {
		if v.names == nil {
			v.names = map[string]bool{}
		}
		v.names[name.Value] = true
	}
}

// ParseTemplate splits s into literal and ${{ }} parts and compiles each
// expression. An unclosed ${{ is an error.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{Source: s}
	rest := s
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, templatePart{literal: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:i]})
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed ${{ in %q: add the closing }}", s)
		}
		src := strings.TrimSpace(rest[i+3 : i+j])
		if src == "" {
			return nil, fmt.Errorf("empty ${{ }} in %q", s)
		}
		e, err := CompileExpr(src)
		if err != nil {
			return nil, fmt.Errorf("in ${{ %s }}: %w", src, err)
		}
		t.parts = append(t.parts, templatePart{expr: e})
		rest = rest[i+j+2:]
	}
}

// Exprs returns the template's compiled expressions.
func (t *Template) Exprs() []*Expr {
	var out []*Expr
	for _, p := range t.parts {
		if p.expr != nil {
			out = append(out, p.expr)
		}
	}
	return out
}

// Render evaluates the template: each part's value inserted as Text
// writes it (docs/workflow.md).
func (t *Template) Render(scope *Scope) (string, error) {
	if len(t.parts) == 1 && t.parts[0].expr == nil {
		return t.parts[0].literal, nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.literal)
			continue
		}
		v, err := p.expr.Eval(scope)
		if err != nil {
			return "", err
		}
		text, err := Text(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p.expr.Source, err)
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// Text is an expression's value as a template inserts it: a string as it
// is, nil (an unset env.NAME, a json that is none, an exit_code of no
// command) as "", anything else as JSON.
//
// # Notes
//
// nil is "" as GitHub Actions renders it: as "null" it became the text of
// a command (`echo [null]`) or a key (`ANTHROPIC_API_KEY=null`) that looked
// set. A nil inside a list or map stays null: that is JSON's.
func Text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("value cannot be written as JSON: %w", err)
	}
	return string(j), nil
}

// renderValue renders every template inside a `with:` value, keeping the
// shape of maps and lists.
func renderValue(v any, scope *Scope) (any, error) {
	switch x := v.(type) {
	case *Template:
		return x.Render(scope)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, scope)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, scope)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// describeMax bounds what describe shows of a value: an error about a
// for-each list or an output must not carry the whole of it.
const describeMax = 200

// describe names a value's type and shows its beginning, for errors.
func describe(v any) string {
	if v == nil {
		return "null"
	}
	var text string
	switch x := v.(type) {
	case string:
		text = strconv.Quote(x[:min(len(x), describeMax)])
		if len(x) > describeMax {
			text += fmt.Sprintf("… (%d bytes in all)", len(x))
		}
		return fmt.Sprintf("%T (%s)", v, text)
	default:
		if exprguard.TextSize(v, 1<<20) > 1<<20 {
			return fmt.Sprintf("%T (too large to show)", v)
		}
		text = fmt.Sprintf("%v", v)
	}
	if len(text) > describeMax {
		text = fmt.Sprintf("%s… (%d bytes in all)", termtext.Cut(text, describeMax), len(text))
	}
	return fmt.Sprintf("%T (%s)", v, text)
}

// Types says what the names of one workflow hold, as far as the file
// declares it, for TypeChecker.
type Types struct {
	Inputs map[string]string // input name → declared type: string, number, boolean, object, array
	Steps  map[string]bool   // step id → whether it is a for-each (its output and final are lists)
	// JSON is what a step's json holds, for the steps whose schema says
	// (steps.StructuredStep); any other step's json is of unknown type.
	JSON map[string]*steps.Shape
}

// TypeChecker type-checks expressions against the declared types of one
// workflow, where CompileExpr knows only that inputs and steps are maps:
// with it, `steps.x.output` is a string, `inputs.n + 1` a number and
// `steps.x.json.approved` a boolean when x's output schema says so.
//
// # Notes
//
// Names the file does not declare (an unknown input, step or field) are of
// unknown type here: what refers to them is validate's to report, once.
type TypeChecker struct{ config *conf.Config }

// NewTypeChecker builds the checker for t.
func NewTypeChecker(t Types) *TypeChecker {
	inputs := types.Map{types.Extra: types.Any}
	for name, typ := range t.Inputs {
		inputs[name] = inputType(typ)
	}
	stepsMap := types.Map{types.Extra: types.Any}
	for id, forEach := range t.Steps {
		out := types.String
		if forEach {
			out = types.TypeOf([]any{})
		}
		value := types.Type(types.Any)
		if sh := t.JSON[id]; sh != nil {
			value = shapeType(sh)
			if forEach {
				value = types.Array(value)
			}
		}
		stepsMap[id] = types.Map{
			"output": out, "final": out,
			"stop_reason": types.String, "status": types.String, "json": value,
			"exit_code": types.Any, // an int, or nil
			types.Extra: types.Any,
		}
	}
	env := types.Map{
		"inputs":   inputs,
		"env":      types.Map{types.Extra: types.String},
		"steps":    stepsMap,
		"run":      types.Map{"id": types.String, "workspace": types.String},
		"workflow": types.Map{"name": types.String},
		"item":     types.Any,
		"index":    types.Int,
	}
	return &TypeChecker{config: exprguard.NewConfig(expr.Env(env))}
}

// shapeType is the type of the values a schema's shape accepts: numbers
// are float64, as JSON decodes them; an object is a map of its declared
// properties, closed where the schema allows no others.
func shapeType(sh *steps.Shape) types.Type {
	switch sh.Type {
	case "string":
		return types.String
	case "number":
		return types.Float64
	case "boolean":
		return types.Bool
	case "array":
		if sh.Items == nil {
			return types.TypeOf([]any{})
		}
		return types.Array(shapeType(sh.Items))
	case "object":
		m := types.Map{}
		for name, p := range sh.Properties {
			m[name] = shapeType(p)
		}
		switch {
		case sh.Closed:
		case sh.Others != nil:
			m[types.Extra] = shapeType(sh.Others)
		default:
			m[types.Extra] = types.Any
		}
		return m
	}
	return types.Any
}

func inputType(typ string) types.Type {
	switch typ {
	case "string":
		return types.String
	case "number":
		return types.Float64
	case "boolean":
		return types.Bool
	case "object":
		return types.TypeOf(map[string]any{})
	case "array":
		return types.TypeOf([]any{})
	}
	return types.Any
}

// Check type-checks e: it returns the type e gives, or nil when the
// checker cannot tell (a json the step's schema does not type, an item, an
// expression that only works with the values of a run), and an error when
// the declared types make e wrong whatever the run: `steps.x.json.approved
// == "yes"` where x's schema declares approved a boolean. The error is
// expr's (a *file.Error, with the offset in e.Source). Use the type to
// refuse what cannot work, never to accept.
func (tc *TypeChecker) Check(e *Expr) (reflect.Type, error) {
	tree, err := checker.ParseCheck(e.Source, tc.config)
	if err != nil {
		return nil, err
	}
	t := tree.Node.Type()
	if t == nil || t.Kind() == reflect.Interface {
		return nil, nil
	}
	return t, nil
}
