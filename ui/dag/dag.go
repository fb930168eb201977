// Package dag draws a run's DAG as inline SVG for the web UI.
//
// Graphviz (github.com/goccy/go-graphviz: Graphviz compiled to WASM, run on wazero) computes
// the layout only: node positions and edge splines, read back in its "plain" format. The SVG
// itself is written here with html/template, so step ids, labels and details — user and agent
// text — are always escaped and never become markup, and the ids, classes and data attributes
// the page, its stylesheet and its browser tests rely on are ours. Graphviz never sees that
// text either: nodes are named n0…nN and given a fixed size computed here from their labels.
package dag

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"unicode/utf8"
)

// State is a step's state as the page shows it.
type State string

// The six states a step can be drawn in; each has its own CSS class "state-X".
const (
	Pending   State = "pending"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Skipped   State = "skipped"
	Cancelled State = "cancelled"
)

// States lists the states in the order a legend shows them.
var States = []State{Pending, Running, Succeeded, Failed, Skipped, Cancelled}

func (s State) valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Node is one step of the run.
type Node struct {
	ID     string
	Label  string // shown text; the ID when empty
	State  State  // Pending when empty
	Detail string // second line, e.g. "3/5 done · attempt 2"; none when empty
	Href   string // the node links there when not empty
	// Marks are drawn as dots at the node's top right, each of class
	// "mark-M": the decisions on the step (pending, rejected, unasked).
	Marks []string
}

// Edge says From is a need of To.
type Edge struct{ From, To string }

// Graph is a run's steps and their needs.
type Graph struct {
	Nodes []Node
	Edges []Edge
}

// MaxNodes and MaxEdges bound the graphs drawn: one Graphviz layout cannot be interrupted
// once started (ctx is checked around it), so the size of a graph is what bounds its time —
// about 0.3 s for 500 workflow-like steps, 2–3 s for 1000 steps with 4750 needs.
const (
	MaxNodes = 1000
	MaxEdges = 5000
)

// CSS styles the SVG's nodes and edges (light mode); the page includes it in its stylesheet.
// It uses classes only, so the page's Content-Security-Policy needs no inline styles.
const CSS = `
svg.dag { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; max-width: 100%; height: auto; }
svg.dag .edge { fill: none; stroke: #8a8f98; stroke-width: 1.4; }
svg.dag .arrow { fill: #8a8f98; }
svg.dag .node rect { stroke-width: 1.5; }
svg.dag .node .label { font-size: 13px; fill: #1f2328; }
svg.dag .node .detail { font-size: 11px; fill: #57606a; }
svg.dag a .node .label { text-decoration: underline; text-decoration-color: #afb8c1; }
svg.dag a:hover .node rect, svg.dag a:focus .node rect { stroke-width: 2.5; }
svg.dag .empty { font-size: 13px; fill: #57606a; }
svg.dag .state-pending rect   { fill: #f6f8fa; stroke: #8c959f; stroke-dasharray: 4 3; }
svg.dag .state-running rect   { fill: #ddf4ff; stroke: #0969da; }
svg.dag .state-succeeded rect { fill: #dafbe1; stroke: #1a7f37; }
svg.dag .state-failed rect    { fill: #ffebe9; stroke: #cf222e; }
svg.dag .state-skipped rect   { fill: #ffffff; stroke: #afb8c1; }
svg.dag .state-skipped .label { fill: #6e7781; }
svg.dag .state-cancelled rect { fill: #fff8c5; stroke: #9a6700; }
svg.dag .mark circle { stroke: #ffffff; stroke-width: 1; }
svg.dag .mark text { font-size: 10px; font-weight: 700; fill: #ffffff; }
svg.dag .mark-rejected circle { fill: #b42318; }
svg.dag .mark-unasked circle { fill: #8a4b00; }
svg.dag .mark-pending circle { fill: #0550ae; }
`

// markStep is the room one mark takes at a node's right, and markGlyphs
// the letter drawn in each kind's dot (the node's title words them).
const markStep = 15.0

var markGlyphs = map[string]string{"rejected": "✕", "unasked": "!", "pending": "?"}

// markDot is one mark as drawn.
type markDot struct {
	Kind, Glyph   string
	CX, CY, TextY float64
}

// MarkDots places the node's marks in a row inside its top right corner.
func (n drawnNode) MarkDots() []markDot {
	dots := make([]markDot, len(n.Marks))
	for i, m := range n.Marks {
		cx := n.X + n.W - 9 - float64(i)*markStep
		dots[i] = markDot{Kind: m, Glyph: markGlyphs[m], CX: cx, CY: n.Y + 9, TextY: n.Y + 12.5}
	}
	return dots
}

// Sizes in SVG user units (px). Labels are drawn in a monospace font so their width follows
// from their length; long ones are cut with an ellipsis and shown whole in the node's <title>.
const (
	labelFont   = 13.0
	detailFont  = 11.0
	charWidth   = 0.6 // of the font size, for common monospace fonts
	maxLabel    = 32  // runes
	maxDetail   = 40  // runes
	padX        = 12.0
	oneLineH    = 30.0
	twoLineH    = 46.0
	minNodeW    = 60.0
	marginPx    = 6.0
	arrowLength = 9.0
)

// SVG returns the graph as an inline <svg> element. Each node is
// <g class="node state-X" id="node-ID" data-step="ID" data-state="X"> holding its label
// (and detail) as text, wrapped in <a href=Href> when Href is not empty. An empty graph gives
// a small SVG saying "no steps". Bad graphs (unknown or duplicate ids, a cycle, an unknown
// state) give an error naming the step; ctx is honoured while waiting for the layout engine
// and between stages (one Graphviz layout itself runs to its end).
func SVG(ctx context.Context, g Graph) (template.HTML, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("dag: %w", err)
	}
	d, err := prepare(g)
	if err != nil {
		return "", err
	}
	if len(d.nodes) == 0 {
		return render(drawing{W: 160, H: 40, Empty: true})
	}
	pos, err := layout(ctx, d)
	if err != nil {
		return "", err
	}
	return render(pos)
}

// prepared is a checked graph with each node's drawn size.
type prepared struct {
	nodes []drawnNode
	edges [][2]int // indexes into nodes, deduplicated, in input order
}

type drawnNode struct {
	Node
	Title       string // full id (and label), for the <title> tooltip
	ShownLabel  string
	ShownDetail string
	W, H        float64
	X, Y        float64 // top-left, set by layout
	LabelY      float64
	DetailY     float64
	CX          float64
}

func prepare(g Graph) (*prepared, error) {
	if len(g.Nodes) > MaxNodes {
		return nil, fmt.Errorf("dag: %d steps is more than the %d drawn", len(g.Nodes), MaxNodes)
	}
	if len(g.Edges) > MaxEdges {
		return nil, fmt.Errorf("dag: %d needs is more than the %d drawn", len(g.Edges), MaxEdges)
	}
	d := &prepared{nodes: make([]drawnNode, len(g.Nodes))}
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("dag: node %d has an empty id", i)
		}
		if !utf8.ValidString(n.ID) || !utf8.ValidString(n.Label) || !utf8.ValidString(n.Detail) {
			return nil, fmt.Errorf("dag: node %q: id, label or detail is not valid UTF-8", n.ID)
		}
		if _, dup := index[n.ID]; dup {
			return nil, fmt.Errorf("dag: step %q appears twice", n.ID)
		}
		index[n.ID] = i
		if n.State == "" {
			n.State = Pending
		}
		if !n.State.valid() {
			return nil, fmt.Errorf("dag: step %q: unknown state %q (want one of %s)", n.ID, n.State, statesList())
		}
		dn := drawnNode{Node: n, Title: n.ID}
		label := n.Label
		if label == "" {
			label = n.ID
		} else if label != n.ID {
			dn.Title = n.ID + " — " + label
		}
		dn.ShownLabel = cut(label, maxLabel)
		dn.ShownDetail = cut(n.Detail, maxDetail)
		w := float64(utf8.RuneCountInString(dn.ShownLabel)) * labelFont * charWidth
		if dw := float64(utf8.RuneCountInString(dn.ShownDetail)) * detailFont * charWidth; dw > w {
			w = dw
		}
		dn.W = max(minNodeW, w+2*padX) + 2*markStep*float64(len(n.Marks))
		dn.H = oneLineH
		if dn.ShownDetail != "" {
			dn.H = twoLineH
		}
		d.nodes[i] = dn
	}
	seen := make(map[[2]int]bool, len(g.Edges))
	for _, e := range g.Edges {
		from, ok := index[e.From]
		if !ok {
			return nil, fmt.Errorf("dag: edge %q → %q: no step %q", e.From, e.To, e.From)
		}
		to, ok := index[e.To]
		if !ok {
			return nil, fmt.Errorf("dag: edge %q → %q: no step %q", e.From, e.To, e.To)
		}
		if from == to {
			return nil, fmt.Errorf("dag: step %q needs itself", e.From)
		}
		k := [2]int{from, to}
		if !seen[k] {
			seen[k] = true
			d.edges = append(d.edges, k)
		}
	}
	if cyc := findCycle(len(d.nodes), d.edges); cyc != nil {
		ids := make([]string, len(cyc))
		for i, n := range cyc {
			ids[i] = fmt.Sprintf("%q", d.nodes[n].ID)
		}
		return nil, fmt.Errorf("dag: the needs form a cycle: %s", strings.Join(ids, " → "))
	}
	return d, nil
}

func statesList() string {
	s := make([]string, len(States))
	for i, v := range States {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// cut shortens s to at most n runes, ending in an ellipsis when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// findCycle returns one cycle (its nodes, the first repeated at the end) or nil.
func findCycle(n int, edges [][2]int) []int {
	out := make([][]int, n)
	for _, e := range edges {
		out[e[0]] = append(out[e[0]], e[1])
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int, n)
	parent := make([]int, n)
	type frame struct{ node, next int }
	for start := 0; start < n; start++ {
		if color[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(out[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			m := out[top.node][top.next]
			top.next++
			switch color[m] {
			case white:
				color[m] = grey
				parent[m] = top.node
				stack = append(stack, frame{m, 0})
			case grey: // back edge top.node → m closes a cycle
				cyc := []int{top.node}
				for v := top.node; v != m; {
					v = parent[v]
					cyc = append(cyc, v)
				}
				for i, j := 0, len(cyc)-1; i < j; i, j = i+1, j-1 {
					cyc[i], cyc[j] = cyc[j], cyc[i]
				}
				return append(cyc, m)
			}
		}
	}
	return nil
}

var errLayout = errors.New("dag: layout")
