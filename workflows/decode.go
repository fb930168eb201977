package workflows

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// The keys each mapping of the file accepts (docs/workflow.md). Decoding is strict:
// any other key is an error with a suggestion from these lists.
var (
	workflowKeys = []string{"name", "description", "max-parallel", "budget", "inputs", "agents", "policies", "approvals", "sandbox", "gateway", "isolation", "base", "keep", "steps", "outputs"}
	inputKeys    = []string{"type", "required", "default", "description"}
	inputTypes   = []string{"string", "number", "boolean", "object", "array"}
)

// idPattern is what a step id looks like: a word an expression can write
// after a dot (`steps.plan`). namePattern is the same with dashes too, for
// inputs, agents and outputs (an expression reads `inputs["dry-run"]`).
var (
	idPattern   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// decoder turns the node tree of one file into an engine.Workflow,
// collecting every error on the way.
type decoder struct {
	*errorList
	wf *engine.Workflow

	inputs map[string]*engine.Input
	agents map[string]*steps.Agent
	// agentNodes are the agents' mappings, for errors found after decoding.
	agentNodes map[string]*node
	steps      []*stepInfo
	byID       map[string]*stepInfo

	// exprs are the compiled expressions whose references are checked once
	// every step is known.
	exprs []exprUse

	compiled *compileCache
}

func newDecoder(errs *errorList) *decoder {
	return &decoder{
		errorList:  errs,
		wf:         &engine.Workflow{},
		inputs:     map[string]*engine.Input{},
		agents:     map[string]*steps.Agent{},
		agentNodes: map[string]*node{},
		byID:       map[string]*stepInfo{},
		compiled:   newCompileCache(),
	}
}

// workflow decodes the top-level mapping.
func (d *decoder) workflow(root *node) {
	f := d.fields(root, "", workflowKeys)
	if f == nil {
		return
	}
	if n := f["name"]; n == nil {
		d.at(root.pos, "missing name: a workflow needs `name:` (a short word such as review)")
	} else if s, ok := d.str(n, "name"); ok {
		if strings.TrimSpace(s) == "" {
			d.at(n.pos, "name is empty")
		}
		d.wf.Name = s
	}
	if n := f["description"]; n != nil {
		d.wf.Description, _ = d.str(n, "description")
	}
	d.wf.MaxParallel = engine.DefaultMaxParallel()
	if n := f["max-parallel"]; n != nil {
		d.wf.MaxParallel, _ = d.integer(n, "max-parallel", 1)
	}
	if n := f["budget"]; n != nil {
		d.wf.Budget = d.decodeBudget(n)
	}
	if n := f["inputs"]; n != nil {
		d.decodeInputs(n)
	}
	if n := f["agents"]; n != nil {
		d.decodeAgents(n)
	}
	if n := f["policies"]; n != nil {
		d.wf.Policies = d.decodePolicies(n, "policies")
	}
	if n := f["approvals"]; n != nil {
		d.wf.Approvals = d.decodeApprovals(n, "the workflow")
	}
	if n := f["sandbox"]; n != nil {
		// The default of every agent that sets none, and of every step
		// that names no agent (engine.Workflow.Sandbox).
		if sb := d.sandbox(n, ""); sb != nil {
			d.wf.Sandbox = sb
			for _, a := range d.agents {
				if !a.SandboxSet {
					a.Sandbox = sb
				}
			}
		}
	}
	if n := f["gateway"]; n != nil {
		d.defaultGateway(n)
	}
	d.checkGatewayNetwork(f["sandbox"])
	d.wf.Isolation = d.isolation(root, f, "")
	switch n := f["steps"]; {
	case n != nil && n.bad:
		// Reported already.
	case n == nil:
		d.at(root.pos, "missing steps: a workflow needs a list of steps")
	case n.kind == sequenceNode && len(n.items) == 0:
		d.at(n.pos, "steps is empty: a workflow needs at least one step")
	case n.kind != sequenceNode:
		d.wrong(n, "steps: want a list of steps, got %s", n.describe())
	default:
		d.decodeSteps(n)
	}
	if n := f["outputs"]; n != nil {
		d.decodeOutputs(n)
	}
}

func (d *decoder) decodeInputs(n *node) {
	if !d.mapping(n, "inputs") {
		return
	}
	for i, k := range n.keys {
		name := k.value.(string)
		v := n.vals[i]
		if !namePattern.MatchString(name) {
			d.at(k.pos, "input name %q: use letters, digits, _ and -, starting with a letter or _", name)
		}
		in := &engine.Input{Name: name, Type: "string"}
		ctx := fmt.Sprintf("input %q", name)
		f := d.fields(v, ctx, inputKeys)
		if f == nil {
			continue
		}
		typeOK := true
		if t := f["type"]; t != nil {
			s, ok := d.str(t, ctx+": type")
			switch {
			case !ok:
				typeOK = false
			case contains(inputTypes, s):
				in.Type = s
			default:
				typeOK = false
				d.at(t.pos, "%s: unknown type %q%s", ctx, s, knownList(s, inputTypes))
			}
		}
		if r := f["required"]; r != nil {
			in.Required, _ = d.boolean(r, ctx+": required")
		}
		if s := f["description"]; s != nil {
			in.Description, _ = d.str(s, ctx+": description")
		}
		if def := f["default"]; def != nil && typeOK {
			v, err := convertInput(in.Type, def.plain())
			if err != nil {
				d.at(def.pos, "%s: default %s", ctx, err)
			} else {
				in.Default, in.HasDefault = v, true
			}
			if in.Required {
				d.at(def.pos, "%s: has a default and required: true; a required input is always given, so drop one of the two", ctx)
			}
		}
		d.inputs[name] = in
		d.wf.Inputs = append(d.wf.Inputs, in)
	}
}

func (d *decoder) decodeOutputs(n *node) {
	if !d.mapping(n, "outputs") {
		return
	}
	for i, k := range n.keys {
		name := k.value.(string)
		if !namePattern.MatchString(name) {
			d.at(k.pos, "output name %q: use letters, digits, _ and -, starting with a letter or _", name)
		}
		v := n.vals[i]
		s, ok := d.text(v, fmt.Sprintf("outputs: %s", name))
		if !ok {
			continue
		}
		if t := d.template(v, s, scope{outputs: true}); t != nil {
			d.wf.Outputs = append(d.wf.Outputs, &engine.Output{Name: name, Value: t})
		}
	}
}

// fields checks that n is a mapping whose keys are all known, reporting
// every unknown key at its position, and returns the values by key (absent
// keys are nil). It returns nil when n is not a mapping.
func (d *decoder) fields(n *node, ctx string, known []string) map[string]*node {
	if !d.mapping(n, ctx) {
		return nil
	}
	out := make(map[string]*node, len(n.keys))
	for i, k := range n.keys {
		name := k.value.(string)
		if !contains(known, name) {
			d.at(k.pos, "%sunknown key %q%s", prefix(ctx), name, didYouMean(name, known))
			continue
		}
		out[name] = n.vals[i]
	}
	return out
}

// prefix is the context of a message, "" at the top level.
func prefix(ctx string) string {
	if ctx == "" {
		return ""
	}
	return ctx + ": "
}

// wrong reports that n is not what the file should have there, unless n
// stands for a value that was already reported (an unknown alias, say).
func (d *decoder) wrong(n *node, format string, args ...any) {
	if !n.bad {
		d.at(n.pos, format, args...)
	}
}

// mapping reports n unless it is a mapping. ctx "" is the top level.
func (d *decoder) mapping(n *node, ctx string) bool {
	if n.kind == mappingNode {
		return true
	}
	if ctx == "" {
		d.wrong(n, "a workflow is a mapping with at least name and steps, got %s", n.describe())
		return false
	}
	if n.isNull() {
		d.wrong(n, "%s: want a mapping, got nothing", ctx)
		return false
	}
	d.wrong(n, "%s: want a mapping, got %s", ctx, n.describe())
	return false
}

func (d *decoder) str(n *node, what string) (string, bool) {
	if s, ok := n.str(); ok {
		return s, true
	}
	d.wrong(n, "%s: want a string, got %s", what, n.describe())
	return "", false
}

// text accepts any scalar but null as a string, written as in the file:
// env values and args are text even when they look like numbers (PORT: 8080).
func (d *decoder) text(n *node, what string) (string, bool) {
	if n.kind == scalarNode {
		switch v := n.value.(type) {
		case string:
			return v, true
		case int:
			return strconv.Itoa(v), true
		case float64:
			return strconv.FormatFloat(v, 'g', -1, 64), true
		case bool:
			return strconv.FormatBool(v), true
		}
	}
	d.wrong(n, "%s: want a string, got %s", what, n.describe())
	return "", false
}

func (d *decoder) integer(n *node, what string, least int) (int, bool) {
	v, ok := n.value.(int)
	if n.kind != scalarNode || !ok {
		d.wrong(n, "%s: want a whole number of at least %d, got %s", what, least, n.describe())
		return 0, false
	}
	if v < least {
		d.at(n.pos, "%s: want a whole number of at least %d, got %d", what, least, v)
		return 0, false
	}
	return v, true
}

func (d *decoder) boolean(n *node, what string) (bool, bool) {
	v, ok := n.value.(bool)
	if n.kind != scalarNode || !ok {
		d.wrong(n, "%s: want true or false, got %s", what, n.describe())
		return false, false
	}
	return v, true
}

// duration reads a Go duration ("90s", "1h30m") or a whole number of
// seconds, which must be greater than zero: no timing in the file has a
// meaning for zero, and a negative one is always a mistake.
func (d *decoder) duration(n *node, what string) (time.Duration, bool) {
	const hint = "write a Go duration such as 90s, 10m or 1h30m, or a whole number of seconds"
	var v time.Duration
	switch x := n.value.(type) {
	case int:
		if int64(x) > math.MaxInt64/int64(time.Second) {
			d.at(n.pos, "%s: %d seconds is too long", what, x)
			return 0, false
		}
		v = time.Duration(x) * time.Second
	case string:
		if secs, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			if secs > math.MaxInt64/int64(time.Second) {
				d.at(n.pos, "%s: %d seconds is too long", what, secs)
				return 0, false
			}
			v = time.Duration(secs) * time.Second
			break
		}
		p, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			d.at(n.pos, "%s: %q is not a duration; %s", what, x, hint)
			return 0, false
		}
		v = p
	default:
		d.wrong(n, "%s: want a duration, got %s; %s", what, n.describe(), hint)
		return 0, false
	}
	if v <= 0 {
		d.at(n.pos, "%s: want a duration greater than 0, got %s", what, v)
		return 0, false
	}
	return v, true
}

// sortedKeys lists a map's keys in order, for messages that say what exists.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
