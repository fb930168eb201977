package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/acpflow/acpflow/internal/bytesize"
)

// instance is one reactor instance, used by one call at a time.
type instance struct {
	mod    api.Module
	alloc  api.Function
	decide api.Function
	mem    *memoryLimit
	stderr *stderrBuffer
	stack  []uint64
}

// callReactor runs the fast path: request written through acpflow_alloc,
// answer read where acpflow_decide says.
func (m *Module) callReactor(parent, ctx context.Context, req []byte) ([]byte, string, error) {
	inst, err := m.acquire(parent, ctx)
	if err != nil {
		return nil, "", err
	}
	answer, err := m.decide(ctx, inst, req)
	stderr := inst.stderr.String()
	if err != nil {
		// Whatever state the instance is in, nobody should inherit it.
		_ = inst.mod.Close(context.Background())
		var guest guestError
		if errors.As(err, &guest) {
			return nil, stderr, m.failure(parent, ctx, guest.err, inst.mem, stderr)
		}
		return nil, stderr, fmt.Errorf("policy module %s: %w", m.path, err)
	}
	m.release(inst)
	return answer, stderr, nil
}

// guestError marks an error that the guest's code raised (a trap, an exit,
// the time limit), as opposed to a broken answer.
type guestError struct{ err error }

func (g guestError) Error() string { return g.err.Error() }

func (m *Module) decide(ctx context.Context, inst *instance, req []byte) ([]byte, error) {
	inst.mem.refused = false
	if uint64(len(req)) > m.limits.Memory {
		return nil, fmt.Errorf("request of %d bytes is over the memory limit of %s", len(req), bytesize.Format(int64(m.limits.Memory)))
	}
	inst.stack[0] = uint64(len(req))
	if err := inst.alloc.CallWithStack(ctx, inst.stack); err != nil {
		return nil, guestError{err}
	}
	ptr := uint32(inst.stack[0])
	if ptr == 0 {
		// Address 0 is valid memory, but no allocator hands it out: it is
		// malloc's NULL, and writing there would corrupt the guest.
		return nil, fmt.Errorf("%s(%d) returned 0: out of memory?", exportAlloc, len(req))
	}
	if !inst.mod.Memory().Write(ptr, req) {
		return nil, fmt.Errorf("%s(%d) returned %d, which is outside its memory", exportAlloc, len(req), ptr)
	}
	inst.stack[0], inst.stack[1] = uint64(ptr), uint64(len(req))
	if err := inst.decide.CallWithStack(ctx, inst.stack); err != nil {
		return nil, guestError{err}
	}
	at, n := uint32(inst.stack[0]>>32), uint32(inst.stack[0])
	if uint64(n) > uint64(m.limits.Output) {
		return nil, fmt.Errorf("answer over the %s limit", bytesize.Format(int64(m.limits.Output)))
	}
	answer, ok := inst.mod.Memory().Read(at, n)
	if !ok {
		return nil, fmt.Errorf("%s returned %d bytes at %d, which is outside its memory", exportDecide, n, at)
	}
	return bytes.Clone(answer), nil
}

// acquire takes an idle instance or makes one, running _initialize if the
// module exports it.
func (m *Module) acquire(parent, ctx context.Context) (*instance, error) {
	select {
	case inst := <-m.idle:
		return inst, nil
	default:
	}
	inst := &instance{
		mem:    &memoryLimit{limit: m.limits.Memory, spare: m.spare},
		stderr: &stderrBuffer{limit: m.limits.Stderr},
		stack:  make([]uint64, 2),
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(programName).
		WithStderr(inst.stderr).
		WithStartFunctions(exportInit)
	mod, err := m.host.runtime.InstantiateModule(experimental.WithMemoryAllocator(ctx, inst.mem), m.compiled, cfg)
	if err != nil {
		return nil, m.failure(parent, ctx, err, inst.mem, inst.stderr.String())
	}
	inst.mod = mod
	inst.alloc = mod.ExportedFunction(exportAlloc)
	inst.decide = mod.ExportedFunction(exportDecide)
	return inst, nil
}

// release puts a healthy instance back, or closes it when the pool is full.
func (m *Module) release(inst *instance) {
	inst.stderr.reset()
	select {
	case m.idle <- inst:
	default:
		_ = inst.mod.Close(context.Background())
	}
}
