// Package wasm is the wazero host for policy modules (SPEC §5, ABI v1).
//
// It sits below policies in the house and knows nothing of permissions or
// environments: it loads a module, hands it one JSON request with
// "version": 1 added, and gives back one JSON object, or an error that says
// why there is none. What the object must contain is the caller's business.
//
// A Host is made once per process; it owns the wazero runtime, the
// compilation caches and the WASI host functions. Host.Load gives a Module,
// whose Call runs one decision under Limits.
package wasm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Host runs policy modules. Make one per process with NewHost and share it:
// it is safe for concurrent use, and it compiles each module once.
//
// # Notes
//
// Guests are stopped at their time limit by wazero's close-on-context-done
// mode, which costs guest loops about 15–25× in speed (FIELD-NOTES); it is
// the only way to end an infinite loop, and policy guests are short.
type Host struct {
	runtime  wazero.Runtime
	cache    wazero.CompilationCache
	cacheDir string

	mu       sync.Mutex
	compiled map[[sha256.Size]byte]*compilation
}

// compilation is one module being compiled or compiled; done is closed
// when mod or err is set. Concurrent loads of the same bytes wait for the
// first instead of compiling again.
type compilation struct {
	done chan struct{}
	mod  wazero.CompiledModule
	err  error
}

// NewHost makes the process's host. Compiled code is cached on disk in
// os.UserCacheDir()/acpflow/wazero, so a large module (a Go one takes
// about 1.6 s to compile) costs its compile once per machine, not per
// process; where that directory is not writable the host works without
// the on-disk cache.
func NewHost(ctx context.Context) (*Host, error) {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	h := &Host{compiled: map[[sha256.Size]byte]*compilation{}}
	if dir, ok := cacheDir(); ok {
		if cache, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
			h.cache, h.cacheDir = cache, dir
			cfg = cfg.WithCompilationCache(cache)
		}
	}
	h.runtime = wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.runtime); err != nil {
		_ = h.Close(ctx)
		return nil, fmt.Errorf("wasm host: WASI: %w", err)
	}
	return h, nil
}

// CacheDir is the directory of the on-disk compilation cache, or "" when
// the host has none.
func (h *Host) CacheDir() string { return h.cacheDir }

// Close releases the runtime, every instance and the compiled code. Modules
// loaded from h fail after it.
func (h *Host) Close(ctx context.Context) error {
	err := h.runtime.Close(ctx)
	if h.cache != nil {
		err = errors.Join(err, h.cache.Close(ctx))
	}
	return err
}

// cacheDir picks the on-disk cache directory and checks that it is
// writable: wazero fails a compile whose result it cannot store, so an
// unwritable cache would break every load instead of just slowing it down.
func cacheDir() (string, bool) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", false
	}
	dir := filepath.Join(base, "acpflow", "wazero")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return "", false
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	return dir, true
}

// compile returns the compiled form of bin, compiling it at most once per
// host however many goroutines ask.
func (h *Host) compile(ctx context.Context, bin []byte) (wazero.CompiledModule, error) {
	key := sha256.Sum256(bin)
	h.mu.Lock()
	c, ok := h.compiled[key]
	if !ok {
		c = &compilation{done: make(chan struct{})}
		h.compiled[key] = c
	}
	h.mu.Unlock()
	if ok {
		select {
		case <-c.done:
			return c.mod, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mod, c.err = h.runtime.CompileModule(ctx, bin)
	if c.err != nil {
		// Forget failures: the next load retries (a cancelled context is
		// not the module's fault) and gets its own error.
		h.mu.Lock()
		delete(h.compiled, key)
		h.mu.Unlock()
	}
	close(c.done)
	return c.mod, c.err
}
