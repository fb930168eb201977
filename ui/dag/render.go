package dag

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"sync"
)

// drawing is a laid-out graph in SVG user units.
type drawing struct {
	W, H  float64
	Empty bool
	Nodes []drawnNode
	Edges []drawnEdge
}

type drawnEdge struct {
	From, To string
	D        string // SVG path data, a cubic B-spline from Graphviz
}

// svgTemplate writes the SVG. html/template escapes every value for its context (text,
// attribute, URL: a javascript: href becomes "#ZgotmplZ"), so no step id, label or detail can
// become markup. Only classes and presentation attributes are used, no inline style, so a
// strict Content-Security-Policy holds. Parsed on first use, not at init: every acpflow
// command links this package, and only `acpflow ui` draws.
var svgTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("dag").Funcs(template.FuncMap{"num": num, "join": func(l []string) string { return strings.Join(l, " ") }}).Parse(
		`<svg xmlns="http://www.w3.org/2000/svg" class="dag" viewBox="0 0 {{num .W}} {{num .H}}" width="{{num .W}}" height="{{num .H}}" role="img" aria-label="step graph">` +
			`{{if .Empty}}<text class="empty" x="12" y="24">no steps</text>{{else}}` +
			`<defs><marker id="dag-arrow" viewBox="0 0 10 8" refX="0" refY="4" markerWidth="9" markerHeight="7.2" markerUnits="userSpaceOnUse" orient="auto"><path class="arrow" d="M0,0 L10,4 L0,8 z"/></marker></defs>` +
			`<g class="edges">{{range .Edges}}` +
			`<path class="edge" data-from="{{.From}}" data-to="{{.To}}" d="{{.D}}" marker-end="url(#dag-arrow)"/>` +
			`{{end}}</g>` +
			`<g class="nodes">{{range .Nodes}}` +
			`{{if .Href}}<a href="{{.Href}}">{{end}}` +
			`<g class="node state-{{.State}}" id="node-{{.ID}}" data-step="{{.ID}}" data-state="{{.State}}"{{with .Marks}} data-marks="{{join .}}"{{end}}>` +
			`<title>{{.Title}} ({{.State}}{{if .Detail}}, {{.Detail}}{{end}}{{with .Marks}}; decisions: {{join .}}{{end}})</title>` +
			`<rect x="{{num .X}}" y="{{num .Y}}" width="{{num .W}}" height="{{num .H}}" rx="5"/>` +
			`<text class="label" x="{{num .CX}}" y="{{num .LabelY}}" text-anchor="middle">{{.ShownLabel}}</text>` +
			`{{if .ShownDetail}}<text class="detail" x="{{num .CX}}" y="{{num .DetailY}}" text-anchor="middle">{{.ShownDetail}}</text>{{end}}` +
			`{{range .MarkDots}}<g class="mark mark-{{.Kind}}"><circle cx="{{num .CX}}" cy="{{num .CY}}" r="6.5"/><text x="{{num .CX}}" y="{{num .TextY}}" text-anchor="middle">{{.Glyph}}</text></g>{{end}}` +
			`</g>{{if .Href}}</a>{{end}}` +
			"{{end}}</g>{{end}}</svg>"))
})

func render(d drawing) (template.HTML, error) {
	var b bytes.Buffer
	if err := svgTemplate().Execute(&b, d); err != nil {
		return "", fmt.Errorf("dag: drawing the SVG: %w", err)
	}
	// The template's output is escaped HTML; marking it so lets the page embed it as is.
	return template.HTML(b.String()), nil
}
