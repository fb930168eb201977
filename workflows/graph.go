package workflows

import (
	"fmt"
	"strings"
)

// graph is the needs relation between steps, by their index in d.steps.
type graph struct {
	edges [][]edge // edges[i]: the steps step i needs
	anc   []bitset // anc[i]: every step that runs before step i (transitively)
}

type edge struct {
	to int
	n  *node // the needs entry, for the error position
}

type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// graph resolves every step's needs, reports unknown ids and cycles, and
// computes each step's ancestors for the reference checks.
func (d *decoder) graph() *graph {
	idx := make(map[*stepInfo]int, len(d.steps))
	for i, s := range d.steps {
		idx[s] = i
	}
	g := &graph{edges: make([][]edge, len(d.steps)), anc: make([]bitset, len(d.steps))}
	for i, s := range d.steps {
		for _, n := range s.needs {
			id, _ := n.str()
			t, ok := d.byID[id]
			if !ok {
				d.at(n.pos, "%s: needs unknown step %q%s", s.label, id, d.stepNames(id))
				continue
			}
			g.edges[i] = append(g.edges[i], edge{to: idx[t], n: n})
		}
	}
	g.walk(d)
	return g
}

// stepNames is the tail of an "unknown step" message.
func (d *decoder) stepNames(id string) string {
	var ids []string
	for _, s := range d.steps {
		if s.step.ID != "" {
			ids = append(ids, s.step.ID)
		}
	}
	if s := closestWord(id, ids); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return " (steps: " + strings.Join(ids, ", ") + ")"
}

// walk runs one depth-first search over needs that both finds cycles (an
// edge back to a step still on the stack) and, in post-order, fills in each
// step's ancestors from those of the steps it needs. With a cycle the
// ancestors are approximate, but the cycle itself is an error already.
func (g *graph) walk(d *decoder) {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]int, len(g.edges))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		state[i] = onStack
		stack = append(stack, i)
		g.anc[i] = newBitset(len(g.edges))
		for _, e := range g.edges[i] {
			switch state[e.to] {
			case unvisited:
				visit(e.to)
			case onStack:
				for k := len(stack) - 1; k >= 0; k-- {
					if stack[k] == e.to {
						g.reportCycle(d, stack[k:], reported)
						break
					}
				}
			}
			g.anc[i].set(e.to)
			if g.anc[e.to] != nil {
				g.anc[i].or(g.anc[e.to])
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range g.edges {
		if state[i] == unvisited {
			visit(i)
		}
	}
}

// reportCycle reports a cycle once, starting from the step that comes
// first in the file, at the needs entry that leads to the next one.
func (g *graph) reportCycle(d *decoder, cycle []int, reported map[string]bool) {
	start := 0
	for k, i := range cycle {
		if i < cycle[start] {
			start = k
		}
	}
	// The stack runs from a step to a step it needs, so it is already in
	// "needs" order: cycle[k] needs cycle[k+1], and the last needs the first.
	ordered := append(append([]int(nil), cycle[start:]...), cycle[:start]...)
	ids := make([]string, 0, len(ordered)+1)
	for _, i := range ordered {
		ids = append(ids, d.steps[i].step.ID)
	}
	ids = append(ids, ids[0])
	key := strings.Join(ids, " -> ")
	if reported[key] {
		return
	}
	reported[key] = true
	first, next := ordered[0], ordered[0]
	if len(ordered) > 1 {
		next = ordered[1]
	}
	at := d.steps[first].node.pos
	for _, e := range g.edges[first] {
		if e.to == next {
			at = e.n.pos
			break
		}
	}
	d.at(at, "cycle in needs: %s (each step needs the next, so none can start)", key)
}

// runsBefore reports whether step a is an ancestor of step b.
func (g *graph) runsBefore(a, b int) bool { return g.anc[b].has(a) }
