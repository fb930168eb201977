package wasm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/wasm"
)

// concurrencyHelper, when set to a number of bytes, makes the test binary
// a helper process that makes a host with that instance budget, calls
// testdata/grow.wasm (8 MiB limit; it grows to 7.5 MiB and writes all of
// it) from many goroutines at once and prints what came of it and its
// peak RSS as JSON: RSS must be measured in a process of its own.
const concurrencyHelper = "ACPFLOW_WASM_CONCURRENCY_HELPER"

// concurrentCalls is how many calls the helper makes at once.
const concurrentCalls = 150

type concurrencyReport struct {
	Answered int      `json:"answered"`
	Busy     int      `json:"busy"`
	Other    []string `json:"other"`
	BaseRSS  uint64   `json:"base_rss"` // bytes, before the calls
	PeakRSS  uint64   `json:"peak_rss"` // bytes, VmHWM after them
	Millis   int64    `json:"ms"`
}

func measureConcurrency(budget string) int {
	n, err := strconv.ParseUint(budget, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.WithInstanceMemory(n))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close(ctx)
	// As many instances at once as calls: the host's budget is what is
	// measured here, not the module's own bound.
	// A minute: a call either runs or waits for room and gives up as busy;
	// its own time limit is a hang guard, not a third outcome a loaded
	// machine could bring about.
	m, err := h.Load(ctx, "testdata/grow.wasm", wasm.Limits{Memory: 8 << 20, Timeout: time.Minute, Instances: concurrentCalls})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The budget bounds the memory live at once; the garbage of calls
	// that ended is the collector's business. A collector that lets the
	// heap reach only 1.1× what is live makes RSS show what was live.
	debug.SetGCPercent(10)
	var rep concurrencyReport
	runtime.GC()
	rep.BaseRSS = procStatus("VmRSS")
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < concurrentCalls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answer, _, err := m.Call(ctx, "permission", []byte(`{}`))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && string(answer) == `{"decision":"allow"}`:
				rep.Answered++
			case err != nil && strings.Contains(err.Error(), "the WASM host is busy"):
				rep.Busy++
			default:
				rep.Other = append(rep.Other, fmt.Sprintf("%s, %v", answer, err))
			}
		}()
	}
	wg.Wait()
	rep.Millis = time.Since(start).Milliseconds()
	rep.PeakRSS = procStatus("VmHWM")
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// procStatus reads a size in kB from /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestConcurrentCallsStayWithinTheInstanceBudget makes 150 calls at once
// to a module that grows to 7.5 MiB and writes all of it, on a host whose
// instances may have 64 MiB between them (8 in flight). Unbounded, the
// calls took over a GB (3.4 GB for the 32 MiB modules of the issue).
func TestConcurrentCallsStayWithinTheInstanceBudget(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("peak RSS is read from /proc/self/status")
	}
	const budget = 64 << 20
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), concurrencyHelper+"="+strconv.Itoa(budget))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	var rep concurrencyReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	grew := (rep.PeakRSS - min(rep.BaseRSS, rep.PeakRSS)) >> 20
	t.Logf("%d calls at once, budget %d MiB: %d answered, %d busy, in %d ms; RSS %d MiB before, peak %d MiB (+%d MiB)",
		concurrentCalls, budget>>20, rep.Answered, rep.Busy, rep.Millis, rep.BaseRSS>>20, rep.PeakRSS>>20, grew)
	if len(rep.Other) > 0 || rep.Answered+rep.Busy != concurrentCalls {
		t.Errorf("every call must be answered or fail closed as busy; other outcomes: %q", rep.Other)
	}
	if rep.Answered == 0 {
		t.Error("no call was answered")
	}
	// The instances in flight hold at most the budget, the rest is the
	// collector's slack (+85 to +107 MiB measured with two CPU hogs
	// running). Unbounded (a 4 GiB budget), the same calls grew RSS by
	// 350–490 MiB.
	if limit := uint64(3 * budget >> 20); grew > limit {
		t.Errorf("peak RSS grew by %d MiB during the calls, want at most %d MiB for a budget of %d MiB", grew, limit, budget>>20)
	}
}

// The holder loops until the test cancels it, so it holds the whole
// budget for as long as the queued calls take on any load: the verdicts
// are the calls' errors, which say which limit ended the wait, not times.
func TestABusyHostFailsClosed(t *testing.T) {
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.WithInstanceMemory(wasm.DefaultMemory))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(ctx) })
	holder := load(t, h, "testdata/loop.wasm", wasm.Limits{Timeout: time.Hour})
	holdCtx, release := context.WithCancel(ctx)
	defer release()
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _, _ = holder.Call(holdCtx, "permission", []byte(`{}`)) // loops until released
	}()
	for deadline := time.Now().Add(time.Minute); wasm.FreeInstanceMemory(h) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder did not take the host's memory within a minute")
		}
	}

	quick := load(t, h, "testdata/counter.wasm", wasm.Limits{Timeout: 200 * time.Millisecond})
	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want string
	}{
		{"a queued call gives up after its module's time limit", func() (context.Context, context.CancelFunc) { return ctx, func() {} },
			"policy module testdata/counter.wasm: the WASM host is busy: its instances in flight held all of its 32 MiB of memory for more than 200ms"},
		// The context's 50 ms end before the module's 200 ms (the wait's
		// deadline is the earlier of the two), so the context is the cause.
		{"a queued call gives up when its context ends", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 50*time.Millisecond) },
			"the WASM host is busy (its instances in flight hold all of its 32 MiB of memory), and the call was stopped while it waited: context deadline exceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			callCtx, cancel := c.ctx()
			defer cancel()
			answer, _, err := quick.Call(callCtx, "permission", []byte(`{}`))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Call = %s, %v; want an error containing %q", answer, err, c.want)
			}
		})
	}
	release()
	<-held
	if answer, _, err := quick.Call(ctx, "permission", []byte(`{}`)); err != nil || string(answer) != `{"calls":1}` {
		t.Errorf("after the holder ended: %s, %v; want an answer", answer, err)
	}
}

func TestLoadReadsOnlyRegularFilesOfBoundedSize(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.wasm")
	if err := os.WriteFile(huge, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, wasm.MaxModuleSize+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	cases := []struct{ name, path, want string }{
		{"a FIFO does not hang the load", fifo, "not a regular file (a named pipe)"},
		{"/dev/zero does not fill memory", "/dev/zero", "not a regular file (a character device)"},
		{"a directory is not a module", dir, "not a regular file (a directory)"},
		{"a file over the size limit", huge, "33554433 bytes, over the limit of 32 MiB for a policy module"},
	}
	h := newHost(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The error names the kind of file, which Load finds before it
			// reads: a load that read the FIFO would hang, one that read
			// /dev/zero would fail on size, so no time is asserted.
			_, err := h.Load(context.Background(), c.path, wasm.Limits{})
			if err == nil || !strings.Contains(err.Error(), "policy module "+c.path+": "+c.want) {
				t.Errorf("Load = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
