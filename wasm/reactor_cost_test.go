package wasm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// BenchmarkReactorCost breaks one reactor decision (the strict table's
// make && rm request) into its parts, for issue 28's 10 µs target: the
// guest's own code on a runtime without close-on-context-done (what a call
// would cost if wazero checked for a closed module without leaving native
// code), the same calls on the host's runtime (every loop back-edge an
// exit to Go, and a watchdog goroutine per guest call), with the call's
// deadline, and the whole Module.Call. cpu-ns/op is the process's CPU time
// per decision (getrusage), which a loaded machine does not inflate as it
// does ns/op.
//
// Measured on 2 CPUs at load 9–29 (cpu-ns/op, four runs; issue 28,
// DESIGN.md "Overhead: gemini's exit and the reactor"): c-reactor 4.8–7.4
// µs without the checks, 55–65 µs with them, 62–72 µs through Module.Call;
// the host-only reactor (no loop) 0.05 µs, 3.3–3.9 µs, 4.3–4.8 µs and
// 7–12 µs. The checks' cost is wazero/wazero#2466 (open); the fixes
// proposed (#2482, #2533, open) test the closed flag without leaving
// native code, or only every Nth iteration.
func BenchmarkReactorCost(b *testing.B) {
	text, err := os.ReadFile(filepath.Join("examples", "testdata", "strict", "08-make-and-rm.txt"))
	if err != nil {
		b.Fatal(err)
	}
	head, _, _ := strings.Cut(string(text), "\n---\n")
	request := []byte(head)
	req, err := withVersion(request)
	if err != nil {
		b.Fatal(err)
	}
	for _, mod := range []struct{ name, path string }{
		{"c-reactor", filepath.Join("examples", "prebuilt", "c-reactor.wasm")},
		{"host-only", filepath.Join("testdata", "reactor.wasm")},
	} {
		bin, err := os.ReadFile(mod.path)
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range []struct {
			name     string
			cfg      wazero.RuntimeConfig
			deadline bool
		}{
			{"guest-without-termination-checks", wazero.NewRuntimeConfig(), false},
			{"host-runtime", runtimeConfig(), false},
			{"host-runtime-with-deadline", runtimeConfig(), true},
		} {
			b.Run(mod.name+"/"+v.name, func(b *testing.B) {
				ctx := context.Background()
				r := wazero.NewRuntimeWithConfig(ctx, v.cfg)
				defer r.Close(ctx)
				wasi_snapshot_preview1.MustInstantiate(ctx, r)
				m, err := r.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithName("").WithStartFunctions(exportInit))
				if err != nil {
					b.Fatal(err)
				}
				alloc, decide := m.ExportedFunction(exportAlloc), m.ExportedFunction(exportDecide)
				stack := make([]uint64, 2)
				b.ReportAllocs()
				start := cpuTime()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					callCtx, cancel := ctx, context.CancelFunc(func() {})
					if v.deadline {
						callCtx, cancel = context.WithTimeout(ctx, time.Second)
					}
					stack[0] = uint64(len(req))
					if err := alloc.CallWithStack(callCtx, stack); err != nil {
						b.Fatal(err)
					}
					ptr := uint32(stack[0])
					if !m.Memory().Write(ptr, req) {
						b.Fatal("write outside memory")
					}
					stack[0], stack[1] = uint64(ptr), uint64(len(req))
					if err := decide.CallWithStack(callCtx, stack); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
				b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			})
		}
		b.Run(mod.name+"/Module.Call", func(b *testing.B) {
			ctx := context.Background()
			h, err := NewHost(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(ctx)
			m, err := h.Load(ctx, mod.path, Limits{Timeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := m.Call(ctx, "permission", request); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
