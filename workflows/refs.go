package workflows

import (
	"fmt"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// stepFields are what an expression may read of a step (docs/workflow.md).
var stepFields = []string{"output", "final", "stop_reason", "status", "json", "exit_code"}

// checkRefs checks what every compiled expression refers to: declared
// inputs, declared steps that run before the expression is evaluated, the
// fields a step has, and item/index only where a for-each defines them.
func (d *decoder) checkRefs(g *graph) {
	idx := make(map[*stepInfo]int, len(d.steps))
	for i, s := range d.steps {
		idx[s] = i
	}
	users := d.agentUsers()
	for _, u := range d.exprs {
		seen := map[engine.Ref]bool{}
		for _, r := range u.e.Refs() {
			if seen[r] {
				continue
			}
			seen[r] = true
			switch r.Root {
			case "inputs":
				d.checkInput(u, r)
			case "steps":
				d.checkStepRef(u, r, g, idx, users)
			}
		}
		d.checkLoopVars(u, users)
	}
}

func (d *decoder) checkInput(u exprUse, r engine.Ref) {
	if _, ok := d.inputs[r.Name]; ok {
		return
	}
	at := d.find(u.n, "inputs."+r.Name, 0)
	if len(d.inputs) == 0 {
		d.at(at, "unknown input %q: the workflow declares no inputs (add it under inputs:)", r.Name)
		return
	}
	names := sortedKeys(d.inputs)
	if s := closestWord(r.Name, names); s != "" {
		d.at(at, "unknown input %q; did you mean %q?", r.Name, s)
		return
	}
	d.at(at, "unknown input %q (declared: %s)", r.Name, strings.Join(names, ", "))
}

func (d *decoder) checkStepRef(u exprUse, r engine.Ref, g *graph, idx map[*stepInfo]int, users map[string][]*stepInfo) {
	at := d.find(u.n, "steps."+r.Name, 0)
	target, ok := d.byID[r.Name]
	if !ok {
		d.at(at, "unknown step %q%s", r.Name, d.stepNames(r.Name))
		return
	}
	if r.Field != "" && !contains(stepFields, r.Field) {
		field := d.find(u.n, "steps."+r.Name+"."+r.Field, len("steps."+r.Name+"."))
		d.at(field, "steps.%s has no field %q%s", r.Name, r.Field, knownList(r.Field, stepFields))
	}
	switch {
	case u.sc.outputs:
		// Outputs are evaluated when the run is over: every step has settled.
	case u.sc.step != nil:
		from := u.sc.step
		if msg := ancestry(g, idx, from, target); msg != "" {
			d.at(at, "step %q refers to steps.%s %s", from.step.ID, r.Name, msg)
		}
	case u.sc.agent != "":
		for _, from := range users[u.sc.agent] {
			if msg := ancestry(g, idx, from, target); msg != "" {
				d.at(at, "agent %q is used by step %q, which refers to steps.%s through it %s", u.sc.agent, from.step.ID, r.Name, msg)
			}
		}
	}
}

// ancestry explains why step from cannot read step to, or returns "" when
// to runs before it.
func ancestry(g *graph, idx map[*stepInfo]int, from, to *stepInfo) string {
	f, t := idx[from], idx[to]
	switch {
	case from == to:
		return "but a step cannot read its own result"
	case g.runsBefore(t, f):
		return ""
	case g.runsBefore(f, t):
		return fmt.Sprintf("but %s runs after it (%s depends on %s through needs)", to.step.ID, to.step.ID, from.step.ID)
	}
	return fmt.Sprintf("but does not need it (add %s to needs)", to.step.ID)
}

// checkLoopVars reports item and index outside a step with for-each.
func (d *decoder) checkLoopVars(u exprUse, users map[string][]*stepInfo) {
	for _, v := range loopVars(u.e.Source) {
		at := d.find(u.n, u.e.Source, v.from)
		switch {
		case u.sc.outputs:
			d.at(at, "%s is only defined in a step with for-each, not in outputs", v.name)
		case u.sc.forEachExpr:
			d.at(at, "%s is not defined in for-each itself: it is each element of the list for-each yields", v.name)
		case u.sc.step != nil && !u.sc.step.forEach:
			d.at(at, "%s is only defined in a step with for-each; step %q has none", v.name, u.sc.step.step.ID)
		case u.sc.agent != "":
			for _, s := range users[u.sc.agent] {
				if !s.forEach {
					d.at(at, "%s is only defined in a step with for-each; agent %q is used by step %q, which has none", v.name, u.sc.agent, s.step.ID)
				}
			}
		}
	}
}

type loopVar struct {
	name string
	from int // offset in the expression, in characters
}

// loopVars finds the uses of item and index in an expression. expr does
// not let an expression redeclare them, so every identifier of that name
// is the for-each's.
func loopVars(src string) []loopVar {
	if !strings.Contains(src, "item") && !strings.Contains(src, "index") {
		return nil
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	var v loopVarVisitor
	ast.Walk(&tree.Node, &v)
	return v.found
}

type loopVarVisitor struct{ found []loopVar }

func (v *loopVarVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok && (id.Value == "item" || id.Value == "index") {
		for _, f := range v.found {
			if f.name == id.Value {
				return
			}
		}
		v.found = append(v.found, loopVar{name: id.Value, from: id.Location().From})
	}
}

// agentUsers maps each agent to the steps whose with.agent names it, for
// the checks of templates in the agent's env and args, which are rendered
// in the scope of each such step.
func (d *decoder) agentUsers() map[string][]*stepInfo {
	out := map[string][]*stepInfo{}
	for _, s := range d.steps {
		if name, ok := s.rawWith["agent"].(string); ok && s.step.ID != "" {
			out[name] = append(out[name], s)
		}
	}
	return out
}
