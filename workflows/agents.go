package workflows

import (
	"fmt"
	"strings"
	"time"

	"github.com/acpflow/acpflow/steps"
)

func (d *decoder) decodeAgents(n *node) {
	if !d.mapping(n, "agents") {
		return
	}
	d.wf.Agents = map[string]*steps.Agent{}
	kind := agentKind()
	for i, k := range n.keys {
		name := k.value.(string)
		if !namePattern.MatchString(name) {
			d.at(k.pos, "agent name %q: use letters, digits, _ and -, starting with a letter or _", name)
		}
		// A broken agent is still declared, so that the steps naming it
		// are not reported as well.
		a := steps.NewAgent(name)
		if kind == nil {
			d.at(k.pos, "agent %q: no step kind that talks to agents is built into this acpflow", name)
		} else if f := d.fields(n.vals[i], fmt.Sprintf("agent %q", name), kind.AgentKeys()); f != nil {
			a = kind.DecodeAgent(name, &agentBlock{d: d, name: name, key: k, n: n.vals[i], start: len(d.errs)})
			a.Kind = kind.Name()
		}
		d.agents[name], d.agentNodes[name] = a, n.vals[i]
		d.wf.Agents[name] = a
	}
}

// agentKind is the registered kind that decodes the file's agents (the
// first by name, there being one today: acp-subagent), or nil.
func agentKind() steps.AgentKind {
	for _, name := range steps.Names() {
		k, _ := steps.Lookup(name)
		if ak, ok := k.(steps.AgentKind); ok {
			return ak
		}
	}
	return nil
}

// agentBlock is the cursor an AgentKind decodes one agent through: the
// decoder's readers and messages, on the agent's mapping n (key is its
// name), the errors counted from start.
type agentBlock struct {
	d      *decoder
	name   string
	key, n *node
	start  int
}

var _ steps.AgentBlock = (*agentBlock)(nil)

// at is the node path leads to, or nil when the file does not write it.
func (b *agentBlock) at(path []string) *node {
	x, depth := follow(b.n, path)
	if depth < len(path) {
		return nil
	}
	return x
}

func (b *agentBlock) Has(path ...string) bool { return b.at(path) != nil }

func (b *agentBlock) Value(path ...string) (any, bool) {
	x := b.at(path)
	if x == nil {
		return nil, false
	}
	return x.plain(), x.kind == scalarNode
}

func (b *agentBlock) Keys(path ...string) []string {
	x := b.at(path)
	if x == nil || x.kind != mappingNode {
		return nil
	}
	keys := make([]string, len(x.keys))
	for i, k := range x.keys {
		keys[i] = k.value.(string)
	}
	return keys
}

func (b *agentBlock) Len(path ...string) int {
	if x := b.at(path); x != nil && x.kind == sequenceNode {
		return len(x.items)
	}
	return 0
}

func (b *agentBlock) Dir() string { return b.d.baseDir() }

func (b *agentBlock) Fields(path []string, what string, keys []string) bool {
	return b.d.fields(b.at(path), what, keys) != nil
}

func (b *agentBlock) Mapping(path []string, what string) bool {
	return b.d.mapping(b.at(path), what)
}

func (b *agentBlock) Literal(path []string, what string) (string, bool) {
	return b.d.literal(b.at(path), what)
}

func (b *agentBlock) Text(path []string, what string) (string, bool) {
	return b.d.text(b.at(path), what)
}

func (b *agentBlock) Bool(path []string, what string) (bool, bool) {
	return b.d.boolean(b.at(path), what)
}

func (b *agentBlock) Duration(path []string, what string) (time.Duration, bool) {
	return b.d.duration(b.at(path), what)
}

func (b *agentBlock) DurationOrOff(path []string, what string) (time.Duration, bool) {
	return b.d.durationOrOff(b.at(path), what)
}

func (b *agentBlock) Sandbox(path []string, what string) *steps.Sandbox {
	return b.d.sandbox(b.at(path), what)
}

func (b *agentBlock) Gateway(path []string, what string) *steps.Gateway {
	return b.d.gateway(b.at(path), what, b.name)
}

func (b *agentBlock) Template(path []string, s string) {
	b.d.template(b.at(path), s, scope{agent: b.name})
}

func (b *agentBlock) Report(path []string, format string, args ...any) {
	at := b.key.pos
	if x, depth := follow(b.n, path); depth > 0 {
		at = x.pos
	}
	b.d.at(at, format, args...)
}

func (b *agentBlock) ReportKey(path []string, format string, args ...any) {
	at := b.key.pos
	if len(path) > 0 {
		if m := b.at(path[:len(path)-1]); m != nil && m.kind == mappingNode {
			for _, k := range m.keys {
				if k.value == path[len(path)-1] {
					at = k.pos
					break
				}
			}
		}
	}
	b.d.at(at, format, args...)
}

func (b *agentBlock) Wrong(path []string, format string, args ...any) {
	if x := b.at(path); x != nil {
		b.d.wrong(x, format, args...)
		return
	}
	b.Report(path, format, args...)
}

func (b *agentBlock) Describe(path ...string) string { return b.at(path).describe() }

func (b *agentBlock) KnownList(word string, known []string) string { return knownList(word, known) }

func (b *agentBlock) Clean() bool { return len(b.d.errs) == b.start }

// durationOrOff reads a duration that may also be 0 (written 0 or 0s):
// the setting is off.
func (d *decoder) durationOrOff(n *node, what string) (time.Duration, bool) {
	switch x := n.value.(type) {
	case int:
		if x == 0 {
			return 0, true
		}
	case string:
		if v, err := time.ParseDuration(strings.TrimSpace(x)); err == nil && v == 0 { // "0", "0s", "0ms"…
			return 0, true
		}
	}
	return d.duration(n, what)
}

// literal reads a string that is used as written: an agent's command,
// builtin, preset, cwd and auth are never rendered, so a ${{ }} in one is
// refused rather than passed on as text (a command named "${{ … }}", or
// one chosen by an input, which would let a run's inputs pick what is
// executed).
func (d *decoder) literal(n *node, what string) (string, bool) {
	s, ok := d.str(n, what)
	if ok && strings.Contains(s, "${{") {
		d.at(d.find(n, "${{", 0), "%s: ${{ }} is not rendered here; write the value itself (expressions are rendered in args, env, mode and config)", what)
		return s, false
	}
	return s, ok
}
