package dag

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	graphviz "github.com/acpflow/acpflow/internal/gographviz"
)

func TestDrawsOneGroupPerStepWithItsState(t *testing.T) {
	g := Graph{
		Nodes: []Node{
			{ID: "plan", State: Succeeded, Href: "/runs/r1/steps/plan"},
			{ID: "review", State: Running, Detail: "3/5 done · attempt 2"},
			{ID: "fix", State: Failed},
			{ID: "lint", State: Skipped},
			{ID: "ship", State: Cancelled},
			{ID: "notify"},
		},
		Edges: []Edge{{"plan", "review"}, {"plan", "lint"}, {"review", "fix"}, {"lint", "ship"}, {"fix", "ship"}, {"ship", "notify"}},
	}
	out := mustSVG(t, g)
	doc := parse(t, out)
	nodes := findAll(doc, func(n *elem) bool { return n.Data == "g" && hasClass(n, "node") })
	if len(nodes) != len(g.Nodes) {
		t.Fatalf("%d node groups, want %d:\n%s", len(nodes), len(g.Nodes), out)
	}
	for i, n := range nodes {
		want := g.Nodes[i]
		if want.State == "" {
			want.State = Pending
		}
		if attr(n, "data-step") != want.ID || attr(n, "id") != "node-"+want.ID || attr(n, "data-state") != string(want.State) {
			t.Errorf("node %d: data-step=%q id=%q data-state=%q, want %s/%s", i, attr(n, "data-step"), attr(n, "id"), attr(n, "data-state"), want.ID, want.State)
		}
		if !hasClass(n, "state-"+string(want.State)) {
			t.Errorf("node %s: class %q lacks state-%s", want.ID, attr(n, "class"), want.State)
		}
		if !strings.Contains(text(n), want.ID) {
			t.Errorf("node %s: text %q lacks its id", want.ID, text(n))
		}
		linked := n.Parent != nil && n.Parent.Data == "a"
		if linked != (want.Href != "") || (linked && attr(n.Parent, "href") != want.Href) {
			t.Errorf("node %s: linked=%v (href %q), want href %q", want.ID, linked, attr(n.Parent, "href"), want.Href)
		}
	}
	if got := text(nodes[1]); !strings.Contains(got, "3/5 done · attempt 2") {
		t.Errorf("detail missing from review's text %q", got)
	}
	edges := findAll(doc, func(n *elem) bool { return n.Data == "path" && hasClass(n, "edge") })
	if len(edges) != len(g.Edges) {
		t.Fatalf("%d edges drawn, want %d", len(edges), len(g.Edges))
	}
	for i, e := range edges {
		if attr(e, "data-from") != g.Edges[i].From || attr(e, "data-to") != g.Edges[i].To {
			t.Errorf("edge %d: %s→%s, want %s→%s", i, attr(e, "data-from"), attr(e, "data-to"), g.Edges[i].From, g.Edges[i].To)
		}
		if !regexp.MustCompile(`^M[\d.]+,[\d.]+ C[\d., ]+$`).MatchString(attr(e, "d")) {
			t.Errorf("edge %d: path %q", i, attr(e, "d"))
		}
	}
	// A need is drawn above what needs it (top-to-bottom layout).
	if y(t, nodes[0]) >= y(t, nodes[1]) || y(t, nodes[1]) >= y(t, nodes[2]) {
		t.Errorf("plan, review, fix not drawn top to bottom: %v %v %v", y(t, nodes[0]), y(t, nodes[1]), y(t, nodes[2]))
	}
}

func TestUserTextNeverBecomesMarkup(t *testing.T) {
	evil := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(2)>`,
		`a&b'c"d`,
		`</svg><script>alert(3)</script>`,
	}
	g := Graph{}
	for i, s := range evil {
		g.Nodes = append(g.Nodes, Node{ID: s, Label: "L" + s, Detail: "D" + s, Href: []string{"/ok?x=" + s, "javascript:alert(4)", "", "/s"}[i]})
		if i > 0 {
			g.Edges = append(g.Edges, Edge{evil[i-1], s})
		}
	}
	out := string(mustSVG(t, g))
	for _, bad := range []string{"<script", "<img", "javascript:", "</svg><"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q:\n%s", bad, out)
		}
	}
	doc := parse(t, out)
	if n := len(findAll(doc, func(n *elem) bool { return n.Data == "script" || n.Data == "img" })); n != 0 {
		t.Fatalf("%d script/img elements in the parsed output", n)
	}
	for _, e := range findAll(doc, func(*elem) bool { return true }) {
		for _, a := range e.Attr {
			if strings.HasPrefix(a.Name.Local, "on") {
				t.Errorf("<%s> has an event handler attribute %s=%q", e.Data, a.Name.Local, a.Value)
			}
		}
	}
	nodes := findAll(doc, func(n *elem) bool { return n.Data == "g" && hasClass(n, "node") })
	if len(nodes) != len(evil) {
		t.Fatalf("%d node groups, want %d", len(nodes), len(evil))
	}
	for i, n := range nodes {
		if attr(n, "data-step") != evil[i] {
			t.Errorf("data-step %q, want %q (round trip through escaping)", attr(n, "data-step"), evil[i])
		}
		title := findAll(n, func(n *elem) bool { return n.Data == "title" })
		if len(title) != 1 || !strings.Contains(text(title[0]), evil[i]) {
			t.Errorf("node %d: title does not hold the full id %q", i, evil[i])
		}
	}
}

func TestLongLabelsAreCutAndNodesFitTheirText(t *testing.T) {
	long := strings.Repeat("very-long-step-name-", 5)
	out := mustSVG(t, Graph{Nodes: []Node{{ID: long}, {ID: "a"}}})
	doc := parse(t, out)
	nodes := findAll(doc, func(n *elem) bool { return n.Data == "g" && hasClass(n, "node") })
	label := text(findAll(nodes[0], func(n *elem) bool { return n.Data == "text" })[0])
	if !strings.HasSuffix(label, "…") || len([]rune(label)) != maxLabel {
		t.Errorf("long label shown as %q, want %d runes ending in …", label, maxLabel)
	}
	if !strings.Contains(text(findAll(nodes[0], func(n *elem) bool { return n.Data == "title" })[0]), long) {
		t.Errorf("title lacks the full id")
	}
	wLong, wShort := width(t, nodes[0]), width(t, nodes[1])
	if wLong < float64(maxLabel)*labelFont*charWidth || wShort >= wLong {
		t.Errorf("node widths %v (long) and %v (short) do not follow their labels", wLong, wShort)
	}
}

func TestBadGraphsGiveClearErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		g    Graph
		want string
	}{
		{"unknown need", Graph{Nodes: []Node{{ID: "a"}}, Edges: []Edge{{"ghost", "a"}}}, `no step "ghost"`},
		{"unknown target", Graph{Nodes: []Node{{ID: "a"}}, Edges: []Edge{{"a", "b"}}}, `no step "b"`},
		{"cycle", Graph{Nodes: []Node{{ID: "a"}, {ID: "b"}, {ID: "c"}}, Edges: []Edge{{"a", "b"}, {"b", "c"}, {"c", "b"}}}, `cycle: "b" → "c" → "b"`},
		{"self need", Graph{Nodes: []Node{{ID: "a"}}, Edges: []Edge{{"a", "a"}}}, `step "a" needs itself`},
		{"duplicate", Graph{Nodes: []Node{{ID: "a"}, {ID: "a"}}}, `step "a" appears twice`},
		{"empty id", Graph{Nodes: []Node{{ID: "a"}, {ID: ""}}}, `node 1 has an empty id`},
		{"unknown state", Graph{Nodes: []Node{{ID: "a", State: "exploded"}}}, `step "a": unknown state "exploded"`},
		{"bad utf-8", Graph{Nodes: []Node{{ID: "a\xff"}}}, `not valid UTF-8`},
		{"too many steps", Graph{Nodes: make([]Node, MaxNodes+1)}, `1001 steps is more than the 1000 drawn`},
		{"too many needs", Graph{Nodes: []Node{{ID: "a"}, {ID: "b"}}, Edges: make([]Edge, MaxEdges+1)}, `5001 needs is more than the 5000 drawn`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := SVG(ctx, tc.g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q (output %q)", err, tc.want, out)
			}
		})
	}
}

func TestEmptyGraphSaysSo(t *testing.T) {
	out := string(mustSVG(t, Graph{}))
	if !strings.HasPrefix(out, "<svg") || !strings.Contains(out, "no steps") {
		t.Fatalf("empty graph drawn as %q", out)
	}
}

func TestDoneContextIsHonoured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SVG(ctx, Graph{Nodes: []Node{{ID: "a"}}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: err = %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	if _, err := SVG(ctx, Graph{Nodes: []Node{{ID: "a"}}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: err = %v", err)
	}
	if err := Warm(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Warm past deadline: err = %v", err)
	}
}

func TestWaitingForTheEngineEndsWithTheContext(t *testing.T) {
	if err := Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	engineSlot <- struct{}{} // another layout holds the engine
	defer func() { <-engineSlot }()
	waiting := make(chan struct{})
	onWait = func() { close(waiting) }
	defer func() { onWait = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := SVG(ctx, Graph{Nodes: []Node{{ID: "a"}}})
		done <- err
	}()
	<-waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for the layout engine") {
		t.Fatalf("err = %v", err)
	}
}

func TestSameGraphSameSVG(t *testing.T) {
	g := bigGraph(60)
	first := mustSVG(t, g)
	for i := 0; i < 3; i++ {
		if again := mustSVG(t, g); again != first {
			t.Fatalf("drawing %d differs from the first", i+2)
		}
	}
}

func TestConcurrentCallsAreSafe(t *testing.T) {
	want := mustSVG(t, bigGraph(30))
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			got, err := SVG(context.Background(), bigGraph(30))
			if err == nil && string(got) != want {
				err = fmt.Errorf("concurrent drawing differs")
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestFiveHundredStepsAreDrawn(t *testing.T) {
	g := bigGraph(500)
	doc := parse(t, mustSVG(t, g))
	if n := len(findAll(doc, func(n *elem) bool { return n.Data == "g" && hasClass(n, "node") })); n != 500 {
		t.Fatalf("%d nodes drawn, want 500", n)
	}
	if n := len(findAll(doc, func(n *elem) bool { return n.Data == "path" && hasClass(n, "edge") })); n != len(g.Edges) {
		t.Fatalf("%d edges drawn, want %d", n, len(g.Edges))
	}
}

// bigGraph is a workflow-like DAG of n steps: chains, fan-out/fan-in groups and some wide
// for-each steps (one node each, with a detail line), in all six states.
func bigGraph(n int) Graph {
	var g Graph
	for i := 0; i < n; i++ {
		node := Node{ID: fmt.Sprintf("step-%03d", i), State: States[i%len(States)], Href: fmt.Sprintf("/runs/r/steps/%d", i)}
		if i%25 == 7 {
			node.ID = fmt.Sprintf("review-each-file-%03d", i)
			node.Detail = fmt.Sprintf("%d/40 done · attempt 2", i%40)
		}
		g.Nodes = append(g.Nodes, node)
		switch {
		case i == 0:
		case i%10 == 0: // fan-in: needs the previous five
			for j := i - 5; j < i; j++ {
				g.Edges = append(g.Edges, Edge{g.Nodes[j].ID, node.ID})
			}
		case i%10 >= 5: // fan-out from the last step ending in 4
			g.Edges = append(g.Edges, Edge{g.Nodes[i-i%10+4].ID, node.ID})
		default: // chain
			g.Edges = append(g.Edges, Edge{g.Nodes[i-1].ID, node.ID})
		}
	}
	return g
}

func mustSVG(t testing.TB, g Graph) string {
	t.Helper()
	out, err := SVG(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "<svg") || !strings.HasSuffix(string(out), "</svg>") {
		t.Fatalf("not one <svg> element: %.200s", out)
	}
	return string(out)
}

// elem is a parsed XML element: the SVG is well-formed XML, so a strict XML parse shows
// exactly which elements and attributes a browser gets.
type elem struct {
	Data   string
	Attr   []xml.Attr
	Parent *elem
	Kids   []*elem
	Text   string // character data directly inside, in order with the kids' text (see text)
	chunks []any  // string or *elem, in document order
}

func parse(t *testing.T, s string) *elem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	root := &elem{}
	cur := root
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("output is not well-formed: %v\n%s", err, s)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &elem{Data: tok.Name.Local, Attr: tok.Attr, Parent: cur}
			cur.Kids = append(cur.Kids, e)
			cur.chunks = append(cur.chunks, e)
			cur = e
		case xml.EndElement:
			cur = cur.Parent
		case xml.CharData:
			cur.chunks = append(cur.chunks, string(tok))
		}
	}
	return root
}

func findAll(root *elem, match func(*elem) bool) []*elem {
	var out []*elem
	var walk func(*elem)
	walk = func(n *elem) {
		if n.Data != "" && match(n) {
			out = append(out, n)
		}
		for _, c := range n.Kids {
			walk(c)
		}
	}
	walk(root)
	return out
}

func attr(n *elem, key string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Name.Local == key {
			return a.Value
		}
	}
	return ""
}

func hasClass(n *elem, c string) bool {
	for _, f := range strings.Fields(attr(n, "class")) {
		if f == c {
			return true
		}
	}
	return false
}

func text(n *elem) string {
	var b strings.Builder
	for _, c := range n.chunks {
		switch c := c.(type) {
		case string:
			b.WriteString(c)
		case *elem:
			b.WriteString(text(c))
		}
	}
	return b.String()
}

func rect(t *testing.T, n *elem) *elem {
	r := findAll(n, func(n *elem) bool { return n.Data == "rect" })
	if len(r) != 1 {
		t.Fatalf("node %q has %d rects", attr(n, "data-step"), len(r))
	}
	return r[0]
}

func y(t *testing.T, n *elem) float64     { return num2(t, attr(rect(t, n), "y")) }
func width(t *testing.T, n *elem) float64 { return num2(t, attr(rect(t, n), "width")) }

func num2(t *testing.T, s string) float64 {
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return v
}

func TestEngineIsReplacedWhenItsMemoryGrows(t *testing.T) {
	g := bigGraph(40)
	before := mustSVG(t, g)
	limit, restarts := engineMemoryLimit, engineRestarts
	engineMemoryLimit = 0 // every layout now replaces the instance after it
	defer func() { engineMemoryLimit = limit }()
	for i := 0; i < 3; i++ {
		if got := mustSVG(t, g); got != before {
			t.Fatalf("drawing %d after a restart differs", i)
		}
	}
	if engineRestarts != restarts+3 {
		t.Fatalf("%d restarts, want 3", engineRestarts-restarts)
	}
}

// Linking ui/dag must cost a process nothing until it draws: every acpflow command links it.
// A child process (this test binary, with an empty cache dir) checks that nothing was
// started or written before Warm.
func TestLinkingStartsNothingUntilFirstUse(t *testing.T) {
	if os.Getenv("DAG_LAZY_CHILD") == "1" {
		if n := graphviz.MemorySize(); n != 0 {
			t.Fatalf("Graphviz started before first use (%d bytes of WASM memory)", n)
		}
		if _, err := os.Stat(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "acpflow")); !os.IsNotExist(err) {
			t.Fatalf("cache dir written before first use: %v", err)
		}
		if err := Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		if graphviz.MemorySize() == 0 {
			t.Fatal("Warm started nothing")
		}
		return
	}
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLinkingStartsNothingUntilFirstUse$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DAG_LAZY_CHILD=1", "XDG_CACHE_HOME="+cache)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cache, "acpflow", "graphviz-wasm")); err != nil {
		t.Fatalf("compiled code not cached in the user's cache dir: %v", err)
	}
}
