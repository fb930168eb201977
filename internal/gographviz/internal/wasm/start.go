package wasm

// acpflow patch: upstream compiles and instantiates the Graphviz WASM module in this
// package's init(), which costs every process that links it 0.5 s (compiled code cached in
// TMPDIR) to 4.5 s (not cached) and panics on failure — for acpflow that would be every
// command, not only "acpflow ui". Start does it on first use instead, once per process.

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
)

// lookupFuncs holds the callbacks other packages register at init (Register_*), before the
// module exists; the module uses the same map once started.
var lookupFuncs = &LookupFuncMap{}

var (
	wasmRuntime  wazero.Runtime
	wasmCompiled wazero.CompiledModule
)

var (
	startOnce  sync.Once
	startErr   error
	afterStart []func(context.Context) error
)

// AfterStart registers f to run once the module is instantiated; call it from init only.
func AfterStart(f func(context.Context) error) { afterStart = append(afterStart, f) }

// Start compiles and instantiates the module once per process; later calls return the first
// call's result.
func Start(ctx context.Context) error {
	startOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				startErr = fmt.Errorf("graphviz: starting the WASM module: %v", r)
			}
		}()
		instantiate()
		for _, f := range afterStart {
			if err := f(ctx); err != nil {
				startErr = fmt.Errorf("graphviz: starting the WASM module: %w", err)
				return
			}
		}
	})
	return startErr
}

// Restart replaces the module instance with a fresh one from the compiled module: a WASM
// instance's memory never shrinks, and Graphviz and the binding leave some behind on each
// layout, so a long-running user restarts it now and then. Everything obtained from the old
// instance (contexts, graphs) is invalid afterwards. Not safe alongside any other call.
func Restart(ctx context.Context) (err error) {
	if err := Start(ctx); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("graphviz: restarting the WASM module: %v", r)
		}
	}()
	if mod != nil {
		_ = mod.mod.Close(ctx)
	}
	newInstance(ctx)
	for _, f := range afterStart {
		if err := f(ctx); err != nil {
			return fmt.Errorf("graphviz: restarting the WASM module: %w", err)
		}
	}
	return nil
}

// MemorySize is the size in bytes of the module instance's memory (0 before Start).
func MemorySize() uint32 {
	if mod == nil || mod.mod.Memory() == nil {
		return 0
	}
	return mod.mod.Memory().Size()
}
