package gvc

import (
	_ "unsafe"

	"github.com/acpflow/acpflow/internal/gographviz/cdt"
	"github.com/acpflow/acpflow/internal/gographviz/cgraph"
	"github.com/acpflow/acpflow/internal/gographviz/internal/wasm"
)

//go:linkname toGraph github.com/acpflow/acpflow/internal/gographviz/cgraph.toGraph
func toGraph(*wasm.Graph) *cgraph.Graph

//go:linkname toGraphWasm github.com/acpflow/acpflow/internal/gographviz/cgraph.toGraphWasm
func toGraphWasm(*cgraph.Graph) *wasm.Graph

//go:linkname toNode github.com/acpflow/acpflow/internal/gographviz/cgraph.toNode
func toNode(*wasm.Node) *cgraph.Node

//go:linkname toEdge github.com/acpflow/acpflow/internal/gographviz/cgraph.toEdge
func toEdge(*wasm.Edge) *cgraph.Edge

//go:linkname toDictLink github.com/acpflow/acpflow/internal/gographviz/cdt.toLink
func toDictLink(*wasm.DictLink) *cdt.Link

//go:linkname toDictLinkWasm github.com/acpflow/acpflow/internal/gographviz/cdt.toLinkWasm
func toDictLinkWasm(*cdt.Link) *wasm.DictLink
