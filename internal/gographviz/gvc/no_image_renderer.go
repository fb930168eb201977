package gvc

// acpflow patch: upstream's image_renderer.go (PNG/JPG rendering through fogleman/gg,
// golang/freetype, flopp/go-findfont and disintegration/imaging) is left out, so acpflow does
// not carry those modules; Graphviz's own renderers (svg, plain, json, dot) in the WASM
// module are unaffected. The PNG/JPG plugins render nothing with this stub.
type ImageRenderer struct {
	*DefaultRenderEngine
}
