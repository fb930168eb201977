// Package exprguard bounds what one evaluation of an expr-lang expression
// may build, for the engine's templates and conditions and for the expr
// rules of policies alike: one set of limits, one way to compile.
//
// expr's own memory budget counts the elements of lists and maps, not the
// bytes of strings: `reduce(1..40, #acc + #acc, "x")` or a repeat of a
// repeat allocates terabytes before anything checks. Compile rewrites every
// operation that can make a string larger than its inputs (`+` where a
// string may be involved, repeat, join, replace, toJSON, string, toBase64)
// into a call of a guarded version, which counts the bytes it is about to
// build against the evaluation's Meter and fails before allocating past
// MaxBytes.
package exprguard

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/vm"
	"github.com/expr-lang/expr/vm/runtime"
)

// MaxBytes is what the guarded operations of one evaluation may build
// together. A step's output is at most 8 MiB by default (max-output), so
// joining a few outputs fits; a string that doubles in a loop reaches it
// after a few dozen rounds.
const MaxBytes = 64 << 20

// MaxNodes bounds the size of one expression's syntax tree (expr's own
// default, kept explicit: the compiler's time and memory follow it).
const MaxNodes = 10_000

// ErrTooLarge is the error of an evaluation that would build more than
// MaxBytes.
var ErrTooLarge = errors.New("the expression would build more than 64 MiB of text, the limit of one evaluation")

// Meter counts the bytes one evaluation has built. Embed it in an expr
// environment struct with the tag `expr:"-"`, and give each evaluation its
// own environment value (a pointer to it): the guarded operations find the
// meter through `$env`. An environment without one gets a fresh meter per
// operation, so each operation is still bounded.
type Meter struct{ used int64 }

func (m *Meter) meter() *Meter { return m }

type metered interface{ meter() *Meter }

// grow charges n bytes to the evaluation of env, or fails.
func grow(env any, n int64) error {
	if n < 0 || n > MaxBytes {
		return ErrTooLarge
	}
	m, ok := env.(metered)
	if !ok {
		return nil
	}
	mt := m.meter()
	if mt.used+n > MaxBytes {
		return ErrTooLarge
	}
	mt.used += n
	return nil
}

// guarded are the functions the rewritten nodes call; their first argument
// is the environment.
var guarded = map[string]func(env any, args []any) (any, error){
	"+": func(env any, a []any) (any, error) {
		x, xs := a[0].(string)
		y, ys := a[1].(string)
		if xs && ys {
			if err := grow(env, int64(len(x))+int64(len(y))); err != nil {
				return nil, err
			}
			return x + y, nil
		}
		return runtime.Add(a[0], a[1]), nil
	},
	"repeat": func(env any, a []any) (any, error) {
		s := a[0].(string)
		n := runtime.ToInt(a[1])
		if n < 0 {
			return nil, fmt.Errorf("invalid argument for repeat (expected positive integer, got %d)", n)
		}
		if len(s) > 0 && n > math.MaxInt64/len(s) {
			return nil, ErrTooLarge
		}
		if err := grow(env, int64(len(s))*int64(n)); err != nil {
			return nil, err
		}
		return strings.Repeat(s, n), nil
	},
	"join": func(env any, a []any) (any, error) {
		glue := ""
		if len(a) == 2 {
			glue = a[1].(string)
		}
		var parts []string
		switch l := a[0].(type) {
		case []string:
			parts = l
		case []any:
			parts = make([]string, len(l))
			for i, v := range l {
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("join: element %d is a %s, want a string", i, typeName(v))
				}
				parts[i] = s
			}
		default:
			return nil, fmt.Errorf("invalid argument for join (type %s)", typeName(a[0]))
		}
		n := int64(len(glue)) * int64(max(len(parts)-1, 0))
		for _, p := range parts {
			n += int64(len(p))
		}
		if err := grow(env, n); err != nil {
			return nil, err
		}
		return strings.Join(parts, glue), nil
	},
	"replace": func(env any, a []any) (any, error) {
		s, old, repl := a[0].(string), a[1].(string), a[2].(string)
		count := -1
		if len(a) == 4 {
			count = runtime.ToInt(a[3])
		}
		k := strings.Count(s, old)
		if old == "" {
			k = utf8.RuneCountInString(s) + 1
		}
		if count >= 0 && count < k {
			k = count
		}
		if err := grow(env, int64(len(s))+int64(k)*int64(max(len(repl)-len(old), 0))); err != nil {
			return nil, err
		}
		return strings.Replace(s, old, repl, count), nil
	},
	"toJSON": func(env any, a []any) (any, error) {
		if err := grow(env, TextSize(a[0], MaxBytes+1)); err != nil {
			return nil, err
		}
		return builtinCall("toJSON", a)
	},
	"string": func(env any, a []any) (any, error) {
		if err := grow(env, TextSize(a[0], MaxBytes+1)); err != nil {
			return nil, err
		}
		return builtinCall("string", a)
	},
	"toBase64": func(env any, a []any) (any, error) {
		s := a[0].(string)
		if err := grow(env, int64(len(s)+2)/3*4); err != nil {
			return nil, err
		}
		return builtinCall("toBase64", a)
	},
}

func builtinCall(name string, args []any) (any, error) {
	fn := builtin.Builtins[builtin.Index[name]]
	if fn.Fast != nil {
		return fn.Fast(args[0]), nil
	}
	return fn.Func(args...)
}

// TextSize is an upper bound of the length of v written as JSON (with
// toJSON's indentation) or with %v, computed without building it and given
// up past limit, so that a list holding the same large list a million
// times is not walked a million times.
func TextSize(v any, limit int64) int64 {
	const indent = 2
	var n int64
	var walk func(v reflect.Value, depth int64)
	walk = func(v reflect.Value, depth int64) {
		if n > limit {
			return
		}
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				n += 4
				return
			}
			walk(v.Elem(), depth)
		case reflect.String:
			// Escaping writes at most 6 bytes per byte (\u00XX).
			n += 6*int64(v.Len()) + 2
		case reflect.Slice, reflect.Array:
			n += 2
			for i := 0; i < v.Len() && n <= limit; i++ {
				n += 2 + indent*(depth+1)
				walk(v.Index(i), depth+1)
			}
		case reflect.Map:
			n += 2
			it := v.MapRange()
			for it.Next() && n <= limit {
				n += 4 + indent*(depth+1)
				walk(it.Key(), depth+1)
				walk(it.Value(), depth+1)
			}
		case reflect.Struct:
			n += 2
			for i := 0; i < v.NumField() && n <= limit; i++ {
				n += 4 + int64(len(v.Type().Field(i).Name)) + indent*(depth+1)
				walk(v.Field(i), depth+1)
			}
		default:
			n += 32
		}
	}
	walk(reflect.ValueOf(v), 0)
	return n
}

func typeName(v any) string {
	if v == nil {
		return "null"
	}
	return reflect.TypeOf(v).String()
}

// funcName is the name a guarded operation is compiled under. It cannot be
// written in an expression (identifiers do not start with a digit), so a
// user can neither call it nor shadow it.
func funcName(op string) string { return "0guard_" + op }

// Options are the expr options every compile in acpflow uses: the node
// bound, and the guarded functions the rewritten tree calls.
func Options() []expr.Option {
	opts := []expr.Option{expr.MaxNodes(MaxNodes)}
	return opts
}

// install adds the guarded functions to a configuration.
func install(c *conf.Config) {
	for op, fn := range guarded {
		name := funcName(op)
		c.Functions[name] = &builtin.Function{
			Name: name,
			Func: func(args ...any) (any, error) { return fn(args[0], args[1:]) },
		}
	}
}

// NewConfig builds an expr configuration from opts plus Options, ready for
// Compile. Building one costs most of what a compile does; reuse it (not
// from several goroutines at once).
func NewConfig(opts ...expr.Option) *conf.Config {
	c := conf.CreateNew()
	for _, op := range append(Options(), opts...) {
		op(c)
	}
	for name := range c.Disabled {
		delete(c.Builtins, name)
	}
	install(c)
	c.Check()
	return c
}

// Compile parses and type-checks src as expr.Compile does, then rewrites
// the growing operations into their guarded versions and compiles. The
// checker sees the expression as written, so its errors and types are
// expr's own.
func Compile(src string, c *conf.Config) (*vm.Program, error) {
	tree, err := checker.ParseCheck(src, c)
	if err != nil {
		return nil, err
	}
	ast.Walk(&tree.Node, rewriter{})
	if c.Optimize {
		if err := optimizer.Optimize(&tree.Node, c); err != nil {
			var fe *file.Error
			if errors.As(err, &fe) {
				return nil, fe.Bind(tree.Source)
			}
			return nil, err
		}
	}
	return compiler.Compile(tree, c)
}

// rewriter replaces the growing operations of a checked tree.
type rewriter struct{}

func (rewriter) Visit(node *ast.Node) {
	var op string
	var args []ast.Node
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator != "+" || (isNumber(n.Left.Type()) && isNumber(n.Right.Type())) {
			return
		}
		op, args = "+", []ast.Node{n.Left, n.Right}
	case *ast.BuiltinNode:
		if _, ok := guarded[n.Name]; !ok || n.Name == "+" {
			return
		}
		op, args = n.Name, n.Arguments
	default:
		return
	}
	call := &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: funcName(op)},
		Arguments: append([]ast.Node{&ast.IdentifierNode{Value: "$env"}}, args...),
	}
	call.SetType((*node).Type())
	call.SetLocation((*node).Location())
	ast.Patch(node, call)
}

func isNumber(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// scrubMin is the shortest value Scrub looks for anywhere in a message:
// shorter ones ("1", "on") would blank out ordinary words. A quoted part
// of the message is blanked whatever its length when it is a whole value.
const scrubMin = 4

// Scrub removes values that must not be shown (secrets, the environment)
// from an error message: every occurrence of a value of scrubMin bytes or
// more, as written or Go-quoted; every quoted part ("…" or `…`) that is
// a whole value or a piece of one of scrubMin bytes or more (regexp errors
// quote a piece of the pattern); and a whole value in parentheses (expr's
// "int(VALUE)"). Each becomes ***.
//
// # Notes
//
// expr's run-time errors quote the value they failed on
// (`strconv.Atoi: parsing "s3cr3t": invalid syntax`), and so would a
// caller's "got string (…)". Rewording every error without values would
// lose what helps with ordinary ones, so values are taken out instead.
func Scrub(msg string, values []string) string {
	if msg == "" || len(values) == 0 {
		return msg
	}
	var long []string
	for _, v := range values {
		if len(v) >= scrubMin {
			long = append(long, v)
			if q := strings.Trim(fmt.Sprintf("%q", v), `"`); q != v {
				long = append(long, q)
			}
		}
	}
	// Longest first, so that a value containing another is replaced whole.
	slices.SortFunc(long, func(a, b string) int { return len(b) - len(a) })
	for _, v := range long {
		if strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, "***")
		}
	}
	return scrubQuoted(msg, values)
}

// scrubQuoted blanks quoted parts of msg that are, or are long pieces of,
// one of values.
func scrubQuoted(msg string, values []string) string {
	secret := func(q string) bool {
		if q == "" || q == "***" {
			return false
		}
		for _, v := range values {
			if q == v || (len(q) >= scrubMin && strings.Contains(v, q)) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		c := msg[i]
		closer := c
		switch c {
		case '"', '`':
		case '(':
			closer = ')' // expr writes int(VALUE)
		default:
			b.WriteByte(c)
			i++
			continue
		}
		end := i + 1
		for end < len(msg) && msg[end] != closer && (c != '(' || msg[end] != '(') {
			if c == '"' && msg[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(msg) || msg[end] != closer {
			b.WriteByte(c)
			i++
			continue
		}
		raw := msg[i+1 : end]
		text := raw
		if c == '"' {
			if u, err := strconv.Unquote(msg[i : end+1]); err == nil {
				text = u
			}
		}
		whole := c == '(' && slices.Contains(values, raw)
		if whole || (c != '(' && (secret(text) || secret(raw))) {
			b.WriteByte(c)
			b.WriteString("***")
			b.WriteByte(closer)
		} else if c == '(' {
			b.WriteByte(c) // what is inside may hold a quoted part
			i++
			continue
		} else {
			b.WriteString(msg[i : end+1])
		}
		i = end + 1
	}
	return b.String()
}
