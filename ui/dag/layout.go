package dag

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	graphviz "github.com/acpflow/acpflow/internal/gographviz"
)

// The Graphviz engine is one WASM module instance per process: compiling it is the expensive
// part (seconds; a fraction of that with the compiled code cached on disk), so it is built
// once, on first use or by Warm, and shared. A WASM instance runs one call at a time, so
// layouts take turns through engineSlot (a channel, so that a caller waiting for its turn can
// give up when its ctx ends); engine is only touched while holding it. The instance's memory
// never shrinks and each layout leaves some behind in it (about 150 KB for 500 steps), so when
// it passes engineMemoryLimit the instance is replaced by a fresh one (tens of ms; the
// compiled code is kept).
var (
	engineOnce sync.Once
	engine     *graphviz.Graphviz
	engineErr  error
	engineSlot = make(chan struct{}, 1)
	onWait     func() // tests: called when a layout has to wait for the engine

	engineMemoryLimit uint32 = 96 << 20
	engineRestarts    int    // tests
)

func startEngine() error {
	engineOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				engineErr = fmt.Errorf("dag: starting Graphviz: %v", r)
			}
		}()
		engine, engineErr = graphviz.NewWithPlugins(context.Background())
		if engineErr != nil {
			engineErr = fmt.Errorf("dag: starting Graphviz: %w", engineErr)
		}
	})
	return engineErr
}

// Warm builds the layout engine (compiles the Graphviz WASM module) so the first page does
// not pay for it; the server calls it at start. It is safe to call more than once.
func Warm(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dag: %w", err)
	}
	return startEngine()
}

// recycleEngine replaces the engine's instance when its memory has grown past the limit;
// the caller holds engineSlot.
func recycleEngine(ctx context.Context) error {
	if graphviz.MemorySize() <= engineMemoryLimit {
		return nil
	}
	if err := graphviz.Restart(ctx); err != nil {
		return fmt.Errorf("dag: restarting Graphviz: %w", err)
	}
	gv, err := graphviz.NewWithPlugins(ctx)
	if err != nil {
		return fmt.Errorf("dag: restarting Graphviz: %w", err)
	}
	engine = gv
	engineRestarts++
	return nil
}

// layout places the nodes and routes the edges with Graphviz's dot, then returns the drawing
// in SVG coordinates (y down, px).
func layout(ctx context.Context, d *prepared) (drawing, error) {
	if err := startEngine(); err != nil {
		return drawing{}, err
	}
	select {
	case engineSlot <- struct{}{}:
	default:
		if onWait != nil {
			onWait()
		}
		select {
		case engineSlot <- struct{}{}:
		case <-ctx.Done():
			return drawing{}, fmt.Errorf("dag: waiting for the layout engine: %w", ctx.Err())
		}
	}
	plain, err := runDot(ctx, engine, dotSource(d))
	if err == nil {
		err = recycleEngine(context.WithoutCancel(ctx))
	}
	<-engineSlot
	if err != nil {
		return drawing{}, err
	}
	if err := ctx.Err(); err != nil {
		return drawing{}, fmt.Errorf("dag: %w", err)
	}
	return place(d, plain)
}

// runDot lays out src and returns Graphviz's "plain" output; a panic in the binding (it
// panics on some WASM failures) becomes an error.
func runDot(ctx context.Context, gv *graphviz.Graphviz, src []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: Graphviz failed: %v", errLayout, r)
		}
	}()
	g, err := graphviz.ParseBytes(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errLayout, err)
	}
	defer g.Close()
	var buf bytes.Buffer
	if err := gv.Render(ctx, g, "plain", &buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errLayout, err)
	}
	return buf.Bytes(), nil
}

// dotSource is the graph in DOT with nodes named n0…nN and no text of the user's: Graphviz
// gets sizes only.
func dotSource(d *prepared) []byte {
	var b bytes.Buffer
	b.WriteString("digraph G {\n rankdir=TB; nodesep=0.3; ranksep=0.45; margin=0;\n")
	b.WriteString(" node [shape=box, fixedsize=true, label=\"\"];\n edge [arrowhead=normal, arrowsize=0.8];\n")
	for i, n := range d.nodes {
		fmt.Fprintf(&b, " n%d [width=%s, height=%s];\n", i, inches(n.W), inches(n.H))
	}
	for _, e := range d.edges {
		fmt.Fprintf(&b, " n%d -> n%d;\n", e[0], e[1])
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func inches(px float64) string { return strconv.FormatFloat(px/72, 'f', 4, 64) }

// place reads Graphviz's plain output ("graph scale w h", "node name x y w h …",
// "edge tail head n x1 y1 … xn yn …", "stop"; inches, y up) into a drawing.
func place(d *prepared, plain []byte) (drawing, error) {
	var dr drawing
	var height float64
	edgeAt := make(map[[2]int]int, len(d.edges))
	for i, e := range d.edges {
		edgeAt[e] = i
	}
	dr.Edges = make([]drawnEdge, len(d.edges))
	placed := 0
	bad := func(line string) (drawing, error) {
		return drawing{}, fmt.Errorf("%w: unexpected Graphviz output line %q", errLayout, line)
	}
	for _, line := range strings.Split(string(plain), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "graph":
			if len(f) < 4 {
				return bad(line)
			}
			w, err1 := strconv.ParseFloat(f[2], 64)
			h, err2 := strconv.ParseFloat(f[3], 64)
			if err1 != nil || err2 != nil {
				return bad(line)
			}
			dr.W, height = w*72+2*marginPx, h*72
			dr.H = height + 2*marginPx
		case "node":
			if len(f) < 4 {
				return bad(line)
			}
			if !placeNode(d, f, height) {
				return bad(line)
			}
			placed++
		case "edge":
			if len(f) < 4 {
				return bad(line)
			}
			from, ok1 := nodeIndex(f[1], len(d.nodes))
			to, ok2 := nodeIndex(f[2], len(d.nodes))
			k, err := strconv.Atoi(f[3])
			if !ok1 || !ok2 || err != nil || k < 2 || len(f) < 4+2*k {
				return bad(line)
			}
			at, ok := edgeAt[[2]int{from, to}]
			if !ok {
				return bad(line)
			}
			path, ok := edgePath(f[4:4+2*k], height)
			if !ok {
				return bad(line)
			}
			dr.Edges[at] = drawnEdge{From: d.nodes[from].ID, To: d.nodes[to].ID, D: path}
		}
	}
	if placed != len(d.nodes) {
		return drawing{}, fmt.Errorf("%w: Graphviz placed %d of %d steps", errLayout, placed, len(d.nodes))
	}
	for _, e := range dr.Edges {
		if e.D == "" {
			return drawing{}, fmt.Errorf("%w: Graphviz did not route every edge", errLayout)
		}
	}
	dr.Nodes = d.nodes
	return dr, nil
}

// placeNode sets the box and label positions of the step a "node" line names
// (f[1]) from its centre (f[2], f[3]: inches, y up from the bottom of a graph
// height pixels tall); false when the line does not name a step or a number.
func placeNode(d *prepared, f []string, height float64) bool {
	i, ok := nodeIndex(f[1], len(d.nodes))
	x, err1 := strconv.ParseFloat(f[2], 64)
	y, err2 := strconv.ParseFloat(f[3], 64)
	if !ok || err1 != nil || err2 != nil {
		return false
	}
	n := &d.nodes[i]
	n.CX = marginPx + x*72
	cy := marginPx + height - y*72
	n.X, n.Y = n.CX-n.W/2, cy-n.H/2
	if n.ShownDetail == "" {
		n.LabelY = cy + labelFont*0.35
	} else {
		n.LabelY = cy - 3
		n.DetailY = cy + detailFont + 1
	}
	return true
}

// edgePath turns an edge's B-spline control points (x y pairs in inches, y up)
// into an SVG path: move to the first, then one cubic curve through the rest;
// false when a coordinate is not a number.
func edgePath(points []string, height float64) (string, bool) {
	var p strings.Builder
	for j := 0; j < len(points)/2; j++ {
		x, err1 := strconv.ParseFloat(points[2*j], 64)
		y, err2 := strconv.ParseFloat(points[2*j+1], 64)
		if err1 != nil || err2 != nil {
			return "", false
		}
		switch {
		case j == 0:
			p.WriteString("M")
		case j == 1:
			p.WriteString(" C")
		default:
			p.WriteString(" ")
		}
		p.WriteString(num(marginPx + x*72))
		p.WriteString(",")
		p.WriteString(num(marginPx + height - y*72))
	}
	return p.String(), true
}

func nodeIndex(name string, n int) (int, bool) {
	if !strings.HasPrefix(name, "n") {
		return 0, false
	}
	i, err := strconv.Atoi(name[1:])
	return i, err == nil && i >= 0 && i < n
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
