package workflows

import (
	"fmt"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

var stepKeys = []string{
	"id", "name", "description", "uses", "with", "needs", "if",
	"timeout", "retries", "continue-on-error", "policies", "for-each", "max-parallel",
	"run", "shell", "env", "cwd", "sandbox", "output-schema",
	"isolation", "base", "keep",
}

// shellKind is the step kind `run:` stands for (steps/shell), and
// runKeys the keys that go with run: on the step itself, each one the
// kind's with: key of the same name, as GitHub Actions writes them.
const shellKind = "shell"

var runKeys = []string{"shell", "env", "cwd", "sandbox", "output-schema"}

// stepInfo is a step while the file is being checked: the engine's step
// plus what the later checks (needs, references, Prepare) need to know.
type stepInfo struct {
	index int
	step  *engine.Step
	node  *node
	label string // `step "plan"`, or `step #3` when it has no usable id

	needs   []*node // the entries of needs:, each naming a step
	forEach bool

	ifNode, forEachNode *node // for the type checks (checkTypes)

	kind     steps.Kind
	withNode *node
	rawWith  map[string]any
	// shorthand says the step is written `run: COMMAND`: its with: values
	// are keys of the step itself, where a kind's error about one is put.
	shorthand bool
	// prepared says that everything Kind.Prepare looks at decoded cleanly,
	// so that Prepare's own errors are not echoes of ones already reported.
	prepared bool
}

func (d *decoder) decodeSteps(n *node) {
	for i, item := range n.items {
		d.decodeStep(i, item)
	}
}

func (d *decoder) decodeStep(index int, n *node) {
	st := &engine.Step{}
	info := &stepInfo{index: index, step: st, node: n, label: fmt.Sprintf("step #%d", index+1)}
	if n.kind != mappingNode {
		d.wrong(n, "%s: want a mapping with at least id and uses, got %s", info.label, n.describe())
		return
	}
	before := len(d.errs)
	d.decodeStepID(info)
	f := d.stepFields(info, n)

	d.decodeKind(info, f)
	withOK := len(d.errs) == before

	if x := f["needs"]; x != nil {
		d.decodeNeeds(info, x)
	}
	if x := f["for-each"]; x != nil {
		info.forEach, info.forEachNode = true, x
		st.ForEach = d.expression(x, info.label+": for-each", scope{step: info, forEachExpr: true})
	}
	if x := f["if"]; x != nil {
		info.ifNode = x
		st.If = d.expression(x, info.label+": if", scope{step: info})
	}
	// A step that sets no timeout gets the default, so that no step can
	// hang a run forever; 0 turns it off.
	st.Timeout = engine.DefaultStepTimeout
	if x := f["timeout"]; x != nil {
		st.Timeout, _ = d.durationOrOff(x, info.label+": timeout")
	}
	if x := f["retries"]; x != nil {
		st.Retries, _ = d.integer(x, info.label+": retries", 0)
	}
	if x := f["continue-on-error"]; x != nil {
		st.ContinueOnError, _ = d.boolean(x, info.label+": continue-on-error")
	}
	if x := f["policies"]; x != nil {
		st.Policies = d.decodePolicies(x, info.label+": policies")
	}
	if x := f["max-parallel"]; x != nil {
		if v, ok := d.integer(x, info.label+": max-parallel", 1); ok {
			st.ForEachMaxParallel = v
			if !info.forEach {
				d.at(x.pos, "%s: max-parallel bounds the runs of a for-each; this step has no for-each", info.label)
			}
		}
	}
	if st.Isolation = d.isolation(n, f, info.label); st.Isolation != nil && d.wf.Isolation != nil {
		d.at(keyAt(n, "isolation"), "%s: isolation: the workflow sets isolation: worktree already, so the step works in the run's worktree; a step's own isolation is for a workflow without one (drop one of the two)", info.label)
	}
	for _, k := range []string{"name", "description"} {
		if x := f[k]; x != nil {
			d.str(x, info.label+": "+k)
		}
	}
	withRead := info.withNode == nil || info.rawWith != nil
	info.prepared = withOK && withRead && info.kind != nil && st.ID != ""
	d.steps = append(d.steps, info)
}

// decodeKind reads what the step does: uses: and its with:, or run: (a
// command line) and the keys that go with it, which are refused beside
// uses:.
func (d *decoder) decodeKind(info *stepInfo, f map[string]*node) {
	n, st := info.node, info.step
	switch u := f["uses"]; {
	case f["run"] != nil:
		d.decodeRun(info, f)
	case u == nil:
		d.at(n.pos, "%s: missing uses: say which kind of step this is (known: %s), or give a command line to run with run:", info.label, strings.Join(steps.Names(), ", "))
	default:
		if s, ok := d.str(u, info.label+": uses"); ok {
			st.Uses = s
			if k, ok := steps.Lookup(s); ok {
				info.kind = k
			} else {
				d.at(u.pos, "%s: unknown uses %q%s", info.label, s, knownList(s, steps.Names()))
			}
		}
	}
	if f["run"] == nil {
		for _, k := range runKeys {
			if x := f[k]; x != nil {
				d.at(keyAt(n, k), "%s: %s: goes with run: (a command line); a step with uses: takes its settings under with:", info.label, k)
			}
		}
		if w := f["with"]; w != nil {
			d.decodeWith(info, w)
		} else if info.kind != nil && len(info.kind.Required()) > 0 {
			d.at(n.pos, "%s: missing with: %s needs %s", info.label, info.kind.Name(), strings.Join(info.kind.Required(), ", "))
		}
	}
}

// decodeStepID reads the id first, so that every later message names the
// step by it.
func (d *decoder) decodeStepID(info *stepInfo) {
	n := info.node.get("id")
	if n == nil {
		d.at(info.node.pos, "%s: missing id: give the step an id such as plan", info.label)
		return
	}
	id, ok := d.str(n, info.label+": id")
	if !ok {
		return
	}
	if !idPattern.MatchString(id) {
		d.at(n.pos, "%s: invalid id %q: an id is letters, digits and _, not starting with a digit (e.g. %s)", info.label, id, idExample(id))
		return
	}
	info.label = fmt.Sprintf("step %q", id)
	if first, dup := d.byID[id]; dup {
		d.at(n.pos, "duplicate step id %q: step #%d (line %d) has it already", id, first.index+1, first.node.pos.line)
		return
	}
	info.step.ID = id
	d.byID[id] = info
}

// idExample turns an invalid id into a valid one, for the message.
func idExample(id string) string {
	var b strings.Builder
	for i, r := range id {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "step_1"
	}
	return b.String()
}

// decodeWith checks the step's with: against its kind's keys and compiles
// every string in it as a template. The engine gets the compiled form; the
// kind's Prepare gets the raw one.
func (d *decoder) decodeWith(info *stepInfo, n *node) {
	info.withNode = n
	ctx := info.label + ": with"
	if !d.mapping(n, ctx) {
		return
	}
	info.step.With = make(map[string]any, len(n.keys))
	info.rawWith = make(map[string]any, len(n.keys))
	var known []string
	if info.kind != nil {
		known = info.kind.Keys()
	}
	for i, k := range n.keys {
		name := k.value.(string)
		if info.kind != nil && !contains(known, name) {
			d.at(k.pos, "%s", unknownWithKey(ctx, name, info.kind, known))
			continue
		}
		info.step.With[name], info.rawWith[name] = d.withValue(n.vals[i], scope{step: info})
	}
	if info.kind == nil {
		return
	}
	var missing []string
	for _, r := range info.kind.Required() {
		if n.get(r) == nil {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		d.at(n.pos, "%s: missing %s (%s needs %s)", ctx, strings.Join(missing, ", "), info.kind.Name(), strings.Join(info.kind.Required(), ", "))
	}
}

// withValue compiles the strings of one with: value, keeping its shape.
func (d *decoder) withValue(n *node, sc scope) (compiled, raw any) {
	switch n.kind {
	case mappingNode:
		c := make(map[string]any, len(n.keys))
		r := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			name := k.value.(string)
			c[name], r[name] = d.withValue(n.vals[i], sc)
		}
		return c, r
	case sequenceNode:
		c := make([]any, len(n.items))
		r := make([]any, len(n.items))
		for i, it := range n.items {
			c[i], r[i] = d.withValue(it, sc)
		}
		return c, r
	}
	if s, ok := n.value.(string); ok {
		if t := d.template(n, s, sc); t != nil {
			return t, s
		}
		return nil, s
	}
	return n.value, n.value
}

// decodeRun reads the run: shorthand: `run: COMMAND` with shell:, env:
// and cwd: beside it is `uses: shell` with those keys under with:, and
// the step's with: is made of them, compiled as decodeWith compiles one.
func (d *decoder) decodeRun(info *stepInfo, f map[string]*node) {
	n := info.node
	if u := f["uses"]; u != nil {
		if s, _ := u.str(); s == shellKind {
			d.at(keyAt(n, "uses"), "%s: run: and uses: together: run: is the shorthand of uses: shell; drop uses:, or put run: under with:", info.label)
		} else {
			d.at(keyAt(n, "uses"), "%s: run: and uses: together: a step either runs a command line (run:) or uses a step kind (uses:), not both", info.label)
		}
	}
	if w := f["with"]; w != nil {
		d.at(keyAt(n, "with"), "%s: with: goes with uses:; beside run:, write %s on the step itself", info.label, strings.Join(runKeys, ", "))
	}
	info.step.Uses = shellKind
	k, ok := steps.Lookup(shellKind)
	if !ok {
		d.at(keyAt(n, "run"), "%s: run: needs the shell step kind, which this program lacks (known: %s)", info.label, strings.Join(steps.Names(), ", "))
		return
	}
	info.kind, info.shorthand = k, true
	info.step.With = map[string]any{}
	info.rawWith = map[string]any{}
	for _, key := range append([]string{"run"}, runKeys...) {
		x := f[key]
		if x == nil {
			continue
		}
		info.step.With[key], info.rawWith[key] = d.withValue(x, scope{step: info})
	}
}

// keyAt is where key is written in the mapping n (the key, not its
// value), or n's position when it has no such key.
func keyAt(n *node, key string) pos {
	for _, k := range n.keys {
		if k.value == key {
			return k.pos
		}
	}
	return n.pos
}

// decodeNeeds reads needs: one id or a list of them. Whether each names a
// step is checked once every step is known (graph).
func (d *decoder) decodeNeeds(info *stepInfo, n *node) {
	items := []*node{n}
	if n.kind == sequenceNode {
		items = n.items
	}
	seen := map[string]bool{}
	for _, it := range items {
		id, ok := it.str()
		if !ok {
			d.wrong(it, "%s: needs: want a step id or a list of them, got %s", info.label, it.describe())
			continue
		}
		if seen[id] {
			d.at(it.pos, "%s: needs lists %s twice", info.label, id)
			continue
		}
		seen[id] = true
		info.needs = append(info.needs, it)
		info.step.Needs = append(info.step.Needs, id)
	}
}

// knownList is the tail of an "unknown X" message that always lists what
// exists, with a suggestion first when one is close.
func knownList(word string, known []string) string {
	tail := ""
	if s := closestWord(word, known); s != "" {
		tail = fmt.Sprintf("; did you mean %q?", s)
	}
	return tail + " (known: " + strings.Join(known, ", ") + ")"
}
