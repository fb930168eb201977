package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	exprcompiler "github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/vm"
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
	Root  string // "inputs" or "steps"
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
	c := conf.CreateNew()
	expr.Env(Scope{})(c)
	c.Check()
	return c
}

// CompileExpr compiles a bare expression.
func CompileExpr(src string) (*Expr, error) {
	compiler.Lock()
	defer compiler.Unlock()
	tree, err := checker.ParseCheck(src, compiler.config)
	if err != nil {
		return nil, err
	}
	if err := optimizer.Optimize(&tree.Node, compiler.config); err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, fe.Bind(tree.Source)
		}
		return nil, err
	}
	p, err := exprcompiler.Compile(tree, compiler.config)
	if err != nil {
		return nil, err
	}
	return &Expr{Source: src, program: p}, nil
}

// Eval evaluates the expression in scope.
func (e *Expr) Eval(scope *Scope) (any, error) {
	v, err := expr.Run(e.program, scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Source, err)
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
		return false, fmt.Errorf("%s: want a boolean, got %s", e.Source, describe(v))
	}
	return b, nil
}

// Refs lists the inputs and steps the expression refers to.
func (e *Expr) Refs() []Ref {
	var v refCollector
	node := e.program.Node()
	ast.Walk(&node, &v)
	return v.refs
}

type refCollector struct{ refs []Ref }

// Visit finds `inputs.x`, `steps.x` and `steps.x.field` (dot or bracket
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
		if base.Value == "inputs" || base.Value == "steps" {
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

// Render evaluates the template: a string value is inserted as is, any
// other value as JSON (SPEC §2).
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
		if s, ok := v.(string); ok {
			b.WriteString(s)
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("%s: value cannot be written as JSON: %w", p.expr.Source, err)
		}
		b.Write(j)
	}
	return b.String(), nil
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

func describe(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T (%v)", v, v)
}
