package wasm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpflow/acpflow/wasm"
)

// inFlightHelper, when set to "N PATH", makes the test binary a helper
// process that loads the module at PATH with the default limits on a host
// with the default budget, calls it N times at once, and prints what came
// of it and its peak RSS as JSON: RSS must be measured in a process of its
// own.
const inFlightHelper = "ACPFLOW_WASM_INFLIGHT_HELPER"

type inFlightReport struct {
	Answered  int      `json:"answered"`
	Failed    []string `json:"failed"`
	Instances int      `json:"instances"` // the module's bound
	BaseRSS   uint64   `json:"base_rss"`  // bytes, after one call
	PeakRSS   uint64   `json:"peak_rss"`  // bytes, VmHWM after the calls
	Millis    int64    `json:"ms"`
}

func measureInFlight(spec string) int {
	n, path, _ := strings.Cut(spec, " ")
	calls, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	h, err := wasm.NewHost(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close(ctx)
	// A long time limit: the calls of a loaded machine must not fail for
	// want of CPU; what is measured is memory.
	m, err := h.Load(ctx, path, wasm.Limits{Timeout: 20 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	request := []byte(`{"kind":"permission","tool":{"kind":"execute","command":"make && rm -rf build"}}`)
	if _, _, err := m.Call(ctx, "permission", request); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rep := inFlightReport{Instances: m.Limits().Instances, BaseRSS: procStatus("VmRSS")}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := m.Call(ctx, "permission", request)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed = append(rep.Failed, err.Error())
				return
			}
			rep.Answered++
		}()
	}
	wg.Wait()
	rep.Millis = time.Since(start).Milliseconds()
	rep.PeakRSS = procStatus("VmHWM")
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// TestMemoryDoesNotGrowWithRequestsInFlight calls a module 12 and then 100
// times at once (each in a process of its own) and compares how much the
// process grew. At most Limits.Instances calls of a module run at once,
// the rest wait in line without an instance, and an ended instance's
// memory goes back to the system and is reused; so 100 requests in flight
// cost about what 12 do. Before: the Go example grew RSS by 55 MiB at 12
// in flight and 295 MiB at 100 (16 instances at once, each one's memory
// left to the collector), and some calls failed as busy.
//
// Class of input: the number of requests in flight, for each kind of
// module: a Go command module (its runtime starts every call), a command
// module that grows its memory to 7.5 MiB and writes all of it, and a
// reactor (instances pooled). The figures are logged; only memory is
// asserted, never time.
func TestMemoryDoesNotGrowWithRequestsInFlight(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("peak RSS is read from /proc/self/status")
	}
	if testing.Short() {
		t.Skip("runs the Go example module hundreds of times: not in -short")
	}
	measure := func(t *testing.T, path string, calls int) inFlightReport {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), inFlightHelper+"="+strconv.Itoa(calls)+" "+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, stderr.String())
		}
		var rep inFlightReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("helper printed %q: %v", out, err)
		}
		t.Logf("%3d in flight: %d answered, %d failed, in %d ms; RSS %d MiB after one call, peak %d MiB (+%d MiB); %d at once",
			calls, rep.Answered, len(rep.Failed), rep.Millis, rep.BaseRSS>>20, rep.PeakRSS>>20, grew(rep)>>20, rep.Instances)
		if rep.Answered+len(rep.Failed) != calls {
			t.Errorf("%d calls, %d outcomes", calls, rep.Answered+len(rep.Failed))
		}
		for _, f := range rep.Failed {
			// Only the guest's own time limit, on a machine too loaded
			// to run it: a call in line waits for its turn.
			if !strings.Contains(f, "timed out after") {
				t.Errorf("a call failed: %s", f)
			}
		}
		return rep
	}
	var instances atomic.Int64
	for _, module := range []string{"examples/prebuilt/go.wasm", "testdata/grow.wasm", "examples/prebuilt/c-reactor.wasm"} {
		t.Run(filepath.Base(module), func(t *testing.T) {
			path, err := filepath.Abs(module)
			if err != nil {
				t.Fatal(err)
			}
			few, many := measure(t, path, 12), measure(t, path, 100)
			instances.Store(int64(many.Instances))
			// The goroutines and requests waiting in line, and the
			// collector's slack, are what 88 more requests may add.
			const slack = 48 << 20
			if grew(many) > grew(few)+slack {
				t.Errorf("100 requests in flight grew the process by %d MiB, 12 by %d MiB: memory grows with the requests in flight",
					grew(many)>>20, grew(few)>>20)
			}
			if limit := uint64(many.Instances)*wasm.DefaultMemory + slack; grew(many) > limit {
				t.Errorf("100 requests in flight grew the process by %d MiB, over %d instances of %d MiB", grew(many)>>20, many.Instances, wasm.DefaultMemory>>20)
			}
		})
	}
	if n := instances.Load(); n < 1 || int(n) != wasm.DefaultInstances() {
		t.Errorf("the module ran %d calls at once, want the default %d", n, wasm.DefaultInstances())
	}
}

func grew(r inFlightReport) uint64 { return r.PeakRSS - min(r.BaseRSS, r.PeakRSS) }

// TestAModuleRunsAtMostItsInstancesAtOnce: however many calls are in
// flight, at most Limits.Instances of a module run at once, and every
// call is answered in turn (none refused as busy while the line moves).
// Class of input: bursts of calls far over the bound, for bounds of one
// and three, on a command module (an instance per call) and a reactor
// (pooled instances); and bounds out of range.
func TestAModuleRunsAtMostItsInstancesAtOnce(t *testing.T) {
	h := newHost(t)
	for _, module := range []string{"testdata/counter.wasm", "testdata/reactor.wasm"} {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s, %d at once", filepath.Base(module), n), func(t *testing.T) {
				m := load(t, h, module, wasm.Limits{Instances: n, Timeout: 20 * time.Second})
				var answered atomic.Int64
				var wg sync.WaitGroup
				for range 40 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							if _, _, err := m.Call(context.Background(), "permission", []byte(`{}`)); err != nil {
								t.Error(err)
								return
							}
							answered.Add(1)
						}
					}()
				}
				wg.Wait()
				if peak := wasm.PeakRunning(m); answered.Load() != 200 || peak > n || peak < 1 {
					t.Errorf("%d calls answered, at most %d at once; want 200, at most %d", answered.Load(), peak, n)
				}
			})
		}
	}
	for _, n := range []int{-1, 1025} {
		if _, err := h.Load(context.Background(), "testdata/reactor.wasm", wasm.Limits{Instances: n}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("instances %d: want from 1 to 1024", n)) {
			t.Errorf("Load with %d instances: %v", n, err)
		}
	}
}
