// Package wasm is the wazero host for policy modules (docs/wasm.md, ABI v1).
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
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Defaults of the host's bounds.
const (
	// DefaultInstanceMemory is how much linear memory the instances in
	// flight on one host may have between them, counted at each module's
	// memory limit: 16 calls at once of modules with the default 32 MiB.
	DefaultInstanceMemory = 512 << 20
	// DefaultCompileTimeout bounds one compile. The Go example, the
	// largest module a compiler here writes, takes 1.6 s.
	DefaultCompileTimeout = 30 * time.Second
)

// HostOption changes a bound of NewHost's host.
type HostOption func(*hostConfig)

type hostConfig struct {
	instanceMemory uint64
	compileTimeout time.Duration
}

// WithInstanceMemory sets how much linear memory the instances in flight
// may have between them (default DefaultInstanceMemory). Each call counts
// its module's memory limit, or the whole budget if its limit is larger,
// so one call can always run.
func WithInstanceMemory(bytes uint64) HostOption {
	return func(c *hostConfig) { c.instanceMemory = bytes }
}

// WithCompileTimeout sets how long one module may take to compile
// (default DefaultCompileTimeout).
func WithCompileTimeout(d time.Duration) HostOption {
	return func(c *hostConfig) { c.compileTimeout = d }
}

// Host runs policy modules. Make one per process with NewHost and share it:
// it is safe for concurrent use, and it compiles each module once.
//
// # Notes
//
// Guests are stopped at their time limit by wazero's close-on-context-done
// mode, which costs guest loops about 15–25× in speed (FIELD-NOTES); it is
// the only way to end an infinite loop, and policy guests are short.
type Host struct {
	runtime        wazero.Runtime
	cache          wazero.CompilationCache
	cacheDir       string
	instances      *memoryBudget // bounds the instances in flight
	compileTimeout time.Duration

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
//
// # Notes
//
// The instances in flight share a memory budget (WithInstanceMemory): a
// call waits for room, for at most its module's time limit and never past
// its context, and then fails closed as busy. Without it, 150 concurrent
// requests to a module that grows its memory took 3.4 GB.
func NewHost(ctx context.Context, opts ...HostOption) (*Host, error) {
	hc := hostConfig{instanceMemory: DefaultInstanceMemory, compileTimeout: DefaultCompileTimeout}
	for _, opt := range opts {
		opt(&hc)
	}
	if hc.instanceMemory < pageSize || hc.compileTimeout <= 0 {
		return nil, fmt.Errorf("wasm host: instance memory %d bytes, compile timeout %s: want at least one 64 KiB page and a positive duration", hc.instanceMemory, hc.compileTimeout)
	}
	cfg := runtimeConfig()
	h := &Host{
		compiled:       map[[sha256.Size]byte]*compilation{},
		instances:      newMemoryBudget(hc.instanceMemory),
		compileTimeout: hc.compileTimeout,
	}
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

// runtimeConfig is the configuration of every runtime the host makes; the
// cache repair depends on two runtimes of it compiling alike.
func runtimeConfig() wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
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
// host however many goroutines ask, within the host's compile timeout.
//
// # Notes
//
// wazero looks at its context only between functions (and only when it
// compiles with more than one worker), so a compile past its time limit is
// abandoned, not stopped: its goroutine finishes the function it is in
// (checkStructure bounds that to a second or two) and then returns. Until
// it has, loads of the same bytes get the timeout error at once instead
// of starting another compile.
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
	forget := func() {
		// Forget failures: the next load retries (a cancelled context is
		// not the module's fault) and gets its own error.
		h.mu.Lock()
		delete(h.compiled, key)
		h.mu.Unlock()
	}
	cctx, cancel := context.WithTimeout(ctx, h.compileTimeout)
	cctx = experimental.WithCompilationWorkers(cctx, max(2, runtime.GOMAXPROCS(0)))
	type result struct {
		mod wazero.CompiledModule
		err error
	}
	finished := make(chan result, 1)
	go func() {
		mod, err := h.compileOrRepair(cctx, bin)
		finished <- result{mod, err}
	}()
	select {
	case r := <-finished:
		cancel()
		c.mod, c.err = r.mod, r.err
		if c.err != nil {
			forget()
		}
	case <-cctx.Done():
		cancel()
		if ctx.Err() != nil {
			c.err = ctx.Err()
		} else {
			c.err = fmt.Errorf("compiling took longer than the limit of %s; it was abandoned", h.compileTimeout)
		}
		go func() {
			if r := <-finished; r.mod != nil {
				_ = r.mod.Close(context.Background())
			}
			forget()
		}()
	}
	close(c.done)
	return c.mod, c.err
}

// compileOrRepair compiles bin; when that fails and the host has an
// on-disk cache, it compiles bin again into a fresh cache directory and, if
// that works, puts the entry it wrote in place of the one in the host's
// cache and compiles once more, from it. A corrupted or unreadable entry
// would otherwise fail the module on every run until someone deleted the
// cache (wazero reports such an entry as an error instead of recompiling).
// A module that does not compile fails the fresh compile too, and its own
// error is returned.
func (h *Host) compileOrRepair(ctx context.Context, bin []byte) (wazero.CompiledModule, error) {
	mod, err := h.runtime.CompileModule(ctx, bin)
	if err == nil || h.cache == nil || ctx.Err() != nil {
		return mod, err
	}
	repaired, rerr := h.repairCacheEntry(ctx, bin)
	switch {
	case rerr != nil && !repaired:
		return nil, err // the module's own fault: its error says why
	case rerr != nil:
		return nil, fmt.Errorf("%w (the on-disk cache %s holds a bad entry for this module, which could not be replaced: %v)", err, h.cacheDir, rerr)
	}
	return h.runtime.CompileModule(ctx, bin)
}

// repairCacheEntry compiles bin with a runtime whose cache is a fresh
// directory inside the host's, and moves the files it wrote over their
// namesakes in the host's cache. The names are wazero's keys, which depend
// on the module, wazero's version and the CPU, never on the directory.
// repaired reports whether bin compiled; err whether the move failed.
func (h *Host) repairCacheEntry(ctx context.Context, bin []byte) (repaired bool, err error) {
	tmp, err := os.MkdirTemp(h.cacheDir, ".repair-*")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	cache, err := wazero.NewCompilationCacheWithDir(tmp)
	if err != nil {
		return false, err
	}
	defer cache.Close(context.Background())
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig().WithCompilationCache(cache))
	defer rt.Close(context.Background())
	if _, err := rt.CompileModule(ctx, bin); err != nil {
		return false, err
	}
	return true, filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(tmp, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(h.cacheDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		return os.Rename(path, dst)
	})
}
