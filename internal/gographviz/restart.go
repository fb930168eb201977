package graphviz

// acpflow patch: access to the lazy module's lifecycle (internal/wasm/start.go).

import (
	"context"

	"github.com/acpflow/acpflow/internal/gographviz/internal/wasm"
)

// Restart replaces the WASM module instance with a fresh one (its memory only grows). Every
// Graphviz and Graph made before is invalid afterwards; make a new Graphviz with New.
func Restart(ctx context.Context) error { return wasm.Restart(ctx) }

// MemorySize is the WASM module instance's memory in bytes (0 before first use).
func MemorySize() uint32 { return wasm.MemorySize() }
