package workflows

import "github.com/acpflow/acpflow/engine"

// compileCache compiles each distinct template and expression of a file
// once. Compiling is half of the time validation takes (expr spends tens of
// microseconds on each), files repeat themselves (the same `if:` on the
// steps of a fan-out), and the compiled forms are immutable, so steps can
// share them.
//
// # Notes
//
// Compiling on several goroutines was measured and dropped: expr's
// compiler allocates so much that two goroutines were slower than one.
type compileCache struct {
	templates map[string]compiled[*engine.Template]
	exprs     map[string]compiled[*engine.Expr]
}

type compiled[T any] struct {
	v   T
	err error
}

func newCompileCache() *compileCache {
	return &compileCache{
		templates: map[string]compiled[*engine.Template]{},
		exprs:     map[string]compiled[*engine.Expr]{},
	}
}

func (c *compileCache) template(s string) (*engine.Template, error) {
	r, ok := c.templates[s]
	if !ok {
		r.v, r.err = engine.ParseTemplate(s)
		c.templates[s] = r
	}
	return r.v, r.err
}

func (c *compileCache) expr(s string) (*engine.Expr, error) {
	r, ok := c.exprs[s]
	if !ok {
		r.v, r.err = engine.CompileExpr(s)
		c.exprs[s] = r
	}
	return r.v, r.err
}
