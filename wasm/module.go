package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/regularfile"
)

// Names of the ABI (docs/wasm.md).
const (
	wasiModule    = "wasi_snapshot_preview1"
	exportStart   = "_start"
	exportInit    = "_initialize"
	exportAlloc   = "acpflow_alloc"
	exportDecide  = "acpflow_decide"
	exportMemory  = "memory"
	programName   = "policy" // argv[0]
	stderrExcerpt = 200      // bytes of stderr quoted in an error
)

// MaxModuleSize is the largest policy module file Load reads. The Go
// example, the largest a compiler here writes, is 3.3 MB.
const MaxModuleSize = 32 << 20

// Module is a loaded policy module with its limits. It is safe for
// concurrent use.
type Module struct {
	host     *Host
	path     string
	compiled wazero.CompiledModule
	limits   Limits
	reactor  bool
	idle     chan *instance // reactor instances ready for a call
	// slots holds one token per call running: at most Limits.Instances.
	// Calls that find it full wait in line, in the order they came
	// (blocked senders of a channel are served first come, first served).
	slots   chan struct{}
	waiting atomic.Int64 // calls waiting in line for a slot
	// peak is the most calls that held a slot at once (len(slots), for
	// the tests: the bound is the channel's capacity).
	peak atomic.Int64
	// spare are linear memories of ended instances, zeroed, for the next
	// ones: a fresh instance per call would otherwise leave its memory to
	// the collector each time, and the garbage of many calls, not the
	// instances at once, would set the process's size.
	spare chan []byte
}

// Load reads the policy module at path, compiles it (once per host and,
// through the on-disk cache, once per machine) and checks that it speaks
// ABI v1: a WASI preview-1 command exporting _start, or a reactor exporting
// acpflow_alloc and acpflow_decide. Zero fields of limits take their
// defaults.
//
// Errors name path and say what is wrong with the file: not a regular file
// or over MaxModuleSize, not a WASM module, a component instead of a core
// module, a function too large to compile in reasonable time (MaxBlocks),
// a compile past the host's time limit, an import acpflow does not
// provide, a missing or mistyped export, a starting memory over the limit.
func (h *Host) Load(ctx context.Context, path string, limits Limits) (*Module, error) {
	limits, err := limits.resolve()
	if err != nil {
		return nil, fmt.Errorf("policy module %s: %w", path, err)
	}
	bin, err := readModule(path)
	if err != nil {
		return nil, fmt.Errorf("policy module %s: %w", path, err)
	}
	if err := checkHeader(bin); err != nil {
		return nil, fmt.Errorf("policy module %s: %w", path, err)
	}
	if err := checkStructure(bin); err != nil {
		return nil, fmt.Errorf("policy module %s: %w", path, err)
	}
	compiled, err := h.compile(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("policy module %s: does not compile: %w", path, err)
	}
	m := &Module{host: h, path: path, compiled: compiled, limits: limits}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("policy module %s: %w", path, err)
	}
	m.slots = make(chan struct{}, limits.Instances)
	m.spare = make(chan []byte, limits.Instances)
	if m.reactor {
		m.idle = make(chan *instance, limits.Instances)
	}
	return m, nil
}

// readModule reads a module file of at most MaxModuleSize bytes. It opens
// without blocking and reads only a regular file, so a FIFO cannot hang a
// load and /dev/zero cannot fill memory.
func readModule(path string) ([]byte, error) {
	bin, err := regularfile.Read(path, MaxModuleSize)
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%w: a policy module is a .wasm file", err)
	}
	var tl *regularfile.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("%w for a policy module", err)
	}
	return bin, err
}

// checkHeader tells a WASM core module from anything else before wazero
// tries, because wazero's "invalid magic number" helps nobody.
func checkHeader(bin []byte) error {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return errors.New("not a WASM module (it does not start with \\0asm)")
	}
	switch version := bin[4:8]; {
	case bytes.Equal(version, []byte{1, 0, 0, 0}):
		return nil
	case version[2] == 1 && version[3] == 0:
		return errors.New("a WebAssembly component, not a core module: build for wasip1 (wasm32-wasip1, GOOS=wasip1); acpflow runs WASI preview-1 core modules")
	default:
		return fmt.Errorf("unsupported WASM binary version %x", version)
	}
}

// check decides the module's style and refuses what could not run.
func (m *Module) check() error {
	for _, f := range m.compiled.ImportedFunctions() {
		if mod, name, _ := f.Import(); mod != wasiModule {
			return fmt.Errorf("imports %s.%s, which acpflow does not provide: a policy module may import only %s", mod, name, wasiModule)
		}
	}
	if len(m.compiled.ImportedMemories()) > 0 {
		return errors.New("imports its memory; a policy module must define its own")
	}
	for _, mem := range m.compiled.ExportedMemories() {
		if need := uint64(mem.Min()) * pageSize; need > m.limits.Memory {
			return fmt.Errorf("needs %s of memory to start, over its limit of %s", bytesize.Format(int64(need)), bytesize.Format(int64(m.limits.Memory)))
		}
	}
	exports := m.compiled.ExportedFunctions()
	alloc, hasAlloc := exports[exportAlloc]
	decide, hasDecide := exports[exportDecide]
	start, hasStart := exports[exportStart]
	switch {
	case hasAlloc || hasDecide:
		m.reactor = true
		switch {
		case !hasAlloc:
			return fmt.Errorf("exports %s but not %s", exportDecide, exportAlloc)
		case !hasDecide:
			return fmt.Errorf("exports %s but not %s", exportAlloc, exportDecide)
		case !signature(alloc, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}):
			return fmt.Errorf("%s has type %s, want (i32) -> i32", exportAlloc, describe(alloc))
		case !signature(decide, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}):
			return fmt.Errorf("%s has type %s, want (i32, i32) -> i64", exportDecide, describe(decide))
		}
		if _, ok := m.compiled.ExportedMemories()[exportMemory]; !ok {
			return fmt.Errorf("exports %s but no memory named %q", exportDecide, exportMemory)
		}
	case hasStart:
		if !signature(start, nil, nil) {
			return fmt.Errorf("%s has type %s, want () -> ()", exportStart, describe(start))
		}
	default:
		return fmt.Errorf("no %s and no %s export: build it as a WASI command (a main function), or export %s and %s", exportStart, exportDecide, exportAlloc, exportDecide)
	}
	return nil
}

func signature(f api.FunctionDefinition, params, results []api.ValueType) bool {
	return bytes.Equal(f.ParamTypes(), params) && bytes.Equal(f.ResultTypes(), results)
}

func describe(f api.FunctionDefinition) string {
	names := func(types []api.ValueType) string {
		s := make([]string, len(types))
		for i, t := range types {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("(%s) -> %s", names(f.ParamTypes()), names(f.ResultTypes()))
}

// Path is the file the module was loaded from, as given to Load.
func (m *Module) Path() string { return m.path }

// Name is the module's file name, which records name as the rule that
// decided (docs/policies.md#permission-policies).
func (m *Module) Name() string { return filepath.Base(m.path) }

// Reactor reports whether the module takes the fast path: a pool of
// reused instances called through acpflow_decide, instead of a fresh
// instance running _start per call.
func (m *Module) Reactor() bool { return m.reactor }

// Limits are the module's limits, defaults filled in.
func (m *Module) Limits() Limits { return m.limits }

// Call asks the module for one decision. request is a JSON object (the
// request of docs/policies.md#the-request or #env-policies); Call adds "version": 1 to it. kind is
// argv[1] of a command module ("permission" or "env"). The answer is the
// module's one JSON object, trimmed; stderr is what the module wrote there,
// capped at Limits.Stderr, also when err is set.
//
// Err is set, and names the module, when the module exits non-zero, traps,
// runs past Limits.Timeout, grows past Limits.Memory, answers more than
// Limits.Output bytes or anything but a JSON object, when ctx ends first,
// or when the host is busy: its instances in flight hold its whole memory
// budget (WithInstanceMemory) for longer than Limits.Timeout.
//
// # Notes
//
// At most Limits.Instances calls of a module run at once, so its memory is
// bounded by that many instances whatever the number of requests in
// flight; the others wait in line, in order, as long as the calls ahead
// of them may take and never past ctx (see enter). The time limit starts
// when the call has its place, so a module's budget of time does not
// depend on the load.
//
// A command module gets a fresh instance per call: no state carries over.
// A reactor's instances are pooled and reused, so its globals persist
// between calls made on the same instance; an instance that fails in any
// way is discarded. A reactor's argv is ["policy"] (instances serve both
// kinds); it reads the kind from the request.
func (m *Module) Call(ctx context.Context, kind string, request []byte) (answer []byte, stderr string, err error) {
	if kind == "" || strings.IndexByte(kind, 0) >= 0 {
		return nil, "", fmt.Errorf("policy module %s: kind %q is not a valid argument", m.path, kind)
	}
	req, err := withVersion(request)
	if err != nil {
		return nil, "", fmt.Errorf("policy module %s: request: %w", m.path, err)
	}
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, "", err
	}
	defer leave()
	callCtx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()
	if m.reactor {
		answer, stderr, err = m.callReactor(ctx, callCtx, req)
	} else {
		answer, stderr, err = m.callCommand(ctx, callCtx, kind, req)
	}
	if err != nil {
		return nil, stderr, err
	}
	if answer, err = checkAnswer(answer); err != nil {
		return nil, stderr, fmt.Errorf("policy module %s: %w", m.path, err)
	}
	return answer, stderr, nil
}

// enter takes a call's place: one of the module's slots, then its weight
// of the host's instance budget. leave gives both back.
//
// # Notes
//
// A call waits for a slot as long as the calls ahead of it in line may
// take, each at most the module's time limit, and never past ctx: a burst
// of requests is answered in turn rather than refused as busy, while
// waiting costs no instance. It then waits for room in the host's budget
// (which other modules share) at most the module's time limit.
func (m *Module) enter(ctx context.Context) (leave func(), err error) {
	weight := m.host.instances.weight(m.limits.Memory)
	leave = func() {
		m.host.instances.release(weight)
		<-m.slots
	}
	select {
	case m.slots <- struct{}{}:
	default:
		if err := m.waitInLine(ctx); err != nil {
			return nil, err
		}
	}
	for now, peak := int64(len(m.slots)), m.peak.Load(); now > peak && !m.peak.CompareAndSwap(peak, now); peak = m.peak.Load() {
	}
	if m.host.instances.tryAcquire(weight) {
		return leave, nil
	}
	if err := m.waitForRoom(ctx, weight); err != nil {
		<-m.slots
		return nil, err
	}
	return leave, nil
}

// waitInLine waits for a slot of the module: at most as long as the calls
// ahead may take, and never past ctx.
func (m *Module) waitInLine(ctx context.Context) error {
	ahead := int(m.waiting.Add(1)) + m.limits.Instances - 1
	defer m.waiting.Add(-1)
	// The line moves by Instances calls at least every time limit (a
	// call's instantiation is within its limit); one more limit is slack.
	rounds := ahead/m.limits.Instances + 1
	wait, cancel := context.WithTimeout(ctx, time.Duration(rounds)*m.limits.Timeout)
	defer cancel()
	select {
	case m.slots <- struct{}{}:
		return nil
	case <-wait.Done():
	}
	n := m.limits.Instances
	if ctx.Err() != nil {
		return fmt.Errorf("policy module %s is busy (it runs %d %s at once), and the call was stopped while it waited in line: %w", m.path, n, plural(n, "call", "calls"), context.Cause(ctx))
	}
	return fmt.Errorf("policy module %s is busy: it runs %d %s at once, and the line did not move for %s", m.path, n, plural(n, "call", "calls"), time.Duration(rounds)*m.limits.Timeout)
}

// waitForRoom waits for weight bytes of the host's instance budget, at most
// the module's time limit and never past ctx.
func (m *Module) waitForRoom(ctx context.Context, weight uint64) error {
	wait, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()
	err := m.host.instances.acquire(wait, weight)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("policy module %s: the WASM host is busy (its instances in flight hold all of its %s of memory), and the call was stopped while it waited: %w", m.path, bytesize.Format(int64(m.host.instances.total)), context.Cause(ctx))
	}
	return fmt.Errorf("policy module %s: the WASM host is busy: its instances in flight held all of its %s of memory for more than %s", m.path, bytesize.Format(int64(m.host.instances.total)), m.limits.Timeout)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// callCommand runs _start in a fresh instance, request on stdin.
func (m *Module) callCommand(parent, ctx context.Context, kind string, req []byte) ([]byte, string, error) {
	mem := &memoryLimit{limit: m.limits.Memory, spare: m.spare}
	out := &answerBuffer{limit: m.limits.Output}
	errOut := &stderrBuffer{limit: m.limits.Stderr}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(programName, kind).
		WithStdin(bytes.NewReader(req)).
		WithStdout(out).
		WithStderr(errOut)
	mod, err := m.host.runtime.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), m.compiled, cfg)
	if mod != nil {
		_ = mod.Close(context.Background())
	}
	stderr := errOut.String()
	switch {
	case out.overflow:
		return nil, stderr, fmt.Errorf("policy module %s: answer over the %s limit", m.path, bytesize.Format(int64(m.limits.Output)))
	case err != nil:
		return nil, stderr, m.failure(parent, ctx, err, mem, stderr)
	}
	return out.buf, stderr, nil
}

// failure explains why a guest call failed, most specific cause first.
func (m *Module) failure(parent, ctx context.Context, err error, mem *memoryLimit, stderr string) error {
	if parent.Err() != nil {
		return fmt.Errorf("policy module %s stopped: %w", m.path, context.Cause(parent))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("policy module %s timed out after %s", m.path, m.limits.Timeout)
	}
	var cause string
	var exit *sys.ExitError
	switch msg := err.Error(); {
	case errors.As(err, &exit):
		cause = fmt.Sprintf("exited with code %d", exit.ExitCode())
	case strings.Contains(msg, "wasm error: "):
		msg = msg[strings.Index(msg, "wasm error: ")+len("wasm error: "):]
		cause = "trapped: " + firstLine(msg)
	default:
		cause = "failed: " + firstLine(msg)
	}
	if mem.refused {
		cause = fmt.Sprintf("went over its memory limit of %s, then %s", bytesize.Format(int64(m.limits.Memory)), cause)
	}
	if line := firstLine(strings.TrimSpace(stderr)); line != "" {
		if len(line) > stderrExcerpt {
			line = line[:stderrExcerpt] + "…"
		}
		cause += " (stderr: " + line + ")"
	}
	return fmt.Errorf("policy module %s %s", m.path, cause)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
