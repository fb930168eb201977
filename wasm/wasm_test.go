package wasm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/wasm"
)

// The hostile modules are WAT sources in testdata/, committed with their
// compiled .wasm so that the tests never skip; TestTestdataIsBuiltFromItsSource
// keeps the two in step where wat2wasm is installed.

func newHost(t testing.TB) *wasm.Host {
	t.Helper()
	h, err := wasm.NewHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// load loads the module at path. A zero time limit becomes a minute, not
// the default second: a test that is not about time must not depend on a
// loaded machine running the module within a second (a memory bomb lost
// that race to the default second at load 12). A test of the time limit
// sets it.
func load(t testing.TB, h *wasm.Host, path string, limits wasm.Limits) *wasm.Module {
	t.Helper()
	if limits.Timeout == 0 {
		limits.Timeout = time.Minute
	}
	m, err := h.Load(context.Background(), path, limits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadRefusesWhatCannotRun(t *testing.T) {
	component := filepath.Join(t.TempDir(), "component.wasm")
	if err := os.WriteFile(component, []byte("\x00asm\x0d\x00\x01\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		limits     wasm.Limits
		want       string
	}{
		{"a text file is not a module", "testdata/notwasm.wasm", wasm.Limits{}, "policy module testdata/notwasm.wasm: not a WASM module"},
		{"a missing file says so", "testdata/missing.wasm", wasm.Limits{}, "policy module testdata/missing.wasm: open testdata/missing.wasm: no such file or directory"},
		{"a component is not a core module", component, wasm.Limits{}, "a WebAssembly component, not a core module"},
		{"a module needs _start or acpflow_decide", "testdata/noexport.wasm", wasm.Limits{}, "testdata/noexport.wasm: no _start and no acpflow_decide export"},
		{"a module may import only WASI", "testdata/imports.wasm", wasm.Limits{}, "imports env.now, which acpflow does not provide"},
		{"a reactor needs both exports", "testdata/halfreactor.wasm", wasm.Limits{}, "exports acpflow_decide but not acpflow_alloc"},
		{"a module must start within its memory limit", "testdata/bigmemory.wasm", wasm.Limits{}, "needs 64 MiB of memory to start, over its limit of 32 MiB"},
		{"limits are checked", "testdata/trap.wasm", wasm.Limits{Memory: 1000}, "memory limit 1000 bytes: want at least one 64 KiB page"},
		{"a negative timeout is refused", "testdata/trap.wasm", wasm.Limits{Timeout: -time.Second}, "timeout -1s: want a positive duration"},
	}
	h := newHost(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), c.path, c.limits)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load(%s) = %v, want an error containing %q", c.path, err, c.want)
			}
		})
	}
}

func TestCallFailsWithAReasonThatNamesTheModule(t *testing.T) {
	cases := []struct {
		name, file string
		limits     wasm.Limits
		want       string
	}{
		{"an infinite loop times out", "loop", wasm.Limits{Timeout: 300 * time.Millisecond}, "policy module testdata/loop.wasm timed out after 300ms"},
		{"a memory bomb stops at the limit", "membomb", wasm.Limits{Timeout: time.Minute}, "policy module testdata/membomb.wasm went over its memory limit of 32 MiB, then trapped: unreachable"},
		{"a smaller memory limit is the one reported", "membomb", wasm.Limits{Memory: 1 << 20, Timeout: time.Minute}, "went over its memory limit of 1 MiB"},
		{"a 100 MiB answer is over the limit", "bigoutput", wasm.Limits{}, "policy module testdata/bigoutput.wasm: answer over the 1 MiB limit"},
		{"a trap is an error", "trap", wasm.Limits{}, "policy module testdata/trap.wasm trapped: unreachable"},
		{"an answer that is not JSON is an error", "badjson", wasm.Limits{}, `policy module testdata/badjson.wasm: answer is not a JSON object: "allow, I suppose"`},
		{"exit code 1 is an error, with stderr", "exit1", wasm.Limits{}, "policy module testdata/exit1.wasm exited with code 1 (stderr: malformed request)"},
		{"exiting non-zero with no answer is an error", "answer", wasm.Limits{}, "policy module testdata/answer.wasm exited with code 3"},
		{"exiting 0 with no answer is an error", "silent", wasm.Limits{}, "policy module testdata/silent.wasm: answered nothing"},
	}
	h := newHost(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case is decided by the one limit or fault it names (load
			// gives a case that is not about time a minute). No elapsed
			// time is asserted: the loop never ends by itself, so its call
			// returning with "timed out" is the proof.
			m := load(t, h, "testdata/"+c.file+".wasm", c.limits)
			answer, _, err := m.Call(context.Background(), "permission", []byte(`{"kind":"permission"}`))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Call = %q, %v; want an error containing %q", answer, err, c.want)
			}
			if answer != nil {
				t.Errorf("answer = %q with the error, want nil", answer)
			}
		})
	}
}

func TestStderrIsReturnedAndCapped(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/exit1.wasm", wasm.Limits{})
	if _, stderr, _ := m.Call(context.Background(), "permission", []byte(`{}`)); stderr != "malformed request\n" {
		t.Errorf("stderr = %q, want %q", stderr, "malformed request\n")
	}
	m = load(t, h, "testdata/exit1.wasm", wasm.Limits{Stderr: 9})
	if _, stderr, _ := m.Call(context.Background(), "permission", []byte(`{}`)); stderr != "malformed\n[9 more bytes of stderr dropped]" {
		t.Errorf("stderr = %q, want the first 9 bytes and a count of the rest", stderr)
	}
}

func TestAHugeAnswerDoesNotGrowTheHostsHeap(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/bigoutput.wasm", wasm.Limits{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, _, err := m.Call(context.Background(), "permission", []byte(`{}`)); err == nil {
		t.Fatal("a 100 MiB answer was accepted")
	}
	runtime.ReadMemStats(&after)
	// The guest wrote 100 MiB; the host may allocate the 1 MiB it keeps,
	// the instance's memory and some change, never the answer.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the host allocated %d MiB during the call, want well under the 100 MiB written", grew>>20)
	}
}

func TestEachCallGetsAFreshInstance(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/counter.wasm", wasm.Limits{})
	for i := 0; i < 3; i++ {
		answer, _, err := m.Call(context.Background(), "permission", []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if string(answer) != `{"calls":1}` {
			t.Fatalf("call %d: answer = %s, want {\"calls\":1}: state carried over", i+1, answer)
		}
	}
}

// probe is what testdata/probe.wasm reports.
type probe struct {
	Argc      int             `json:"argc"`
	Args      []string        `json:"args"`
	Environ   int             `json:"environ"`
	FD3Errno  int             `json:"fd3_errno"`
	OpenErrno int             `json:"open_errno"`
	Stdin     json.RawMessage `json:"stdin"`
}

func callProbe(t *testing.T, m *wasm.Module, kind, request string) probe {
	t.Helper()
	answer, _, err := m.Call(context.Background(), kind, []byte(request))
	if err != nil {
		t.Fatal(err)
	}
	var p probe
	if err := json.Unmarshal(answer, &p); err != nil {
		t.Fatalf("probe answered %s: %v", answer, err)
	}
	return p
}

func TestModuleSeesTwoArgumentsNoEnvironmentAndNoFiles(t *testing.T) {
	t.Setenv("ACPFLOW_TEST_SECRET", "must not be visible")
	h := newHost(t)
	m := load(t, h, "testdata/probe.wasm", wasm.Limits{})
	for _, kind := range []string{"permission", "env"} {
		p := callProbe(t, m, kind, `{}`)
		if p.Argc != 2 || len(p.Args) != 2 || p.Args[0] != "policy" || p.Args[1] != kind {
			t.Errorf("argv = %d %q, want [policy %s]", p.Argc, p.Args, kind)
		}
		if p.Environ != 0 {
			t.Errorf("the module sees %d environment variables, want none", p.Environ)
		}
		const ebadf = 8 // WASI errno: there is no fd 3, so nothing is preopened
		if p.FD3Errno != ebadf || p.OpenErrno != ebadf {
			t.Errorf("fd_prestat_get(3) = %d, path_open(3, etc/passwd) = %d; want EBADF (8) for both", p.FD3Errno, p.OpenErrno)
		}
	}
}

func TestRequestGetsVersionOne(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/probe.wasm", wasm.Limits{})
	cases := []struct{ name, request, stdin string }{
		{"an empty object", `{}`, `{"version":1}`},
		{"white space around", " \n{ }\n", `{"version":1}`},
		{"first member", `{"kind":"permission","tool":{"version":2}}`, `{"version":1,"kind":"permission","tool":{"version":2}}`},
		{"a version the caller set is replaced", `{"version":7,"kind":"env","c":"a && b"}`, `{"c":"a && b","kind":"env","version":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := callProbe(t, m, "permission", c.request).Stdin; string(got) != c.stdin {
				t.Errorf("stdin = %s, want %s", got, c.stdin)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":}`, `{} {}`} {
		if _, _, err := m.Call(context.Background(), "permission", []byte(bad)); err == nil || !strings.Contains(err.Error(), "request: not a JSON object") {
			t.Errorf("Call(%q) = %v, want a request error", bad, err)
		}
	}
}

func TestReactorInstancesArePooledAndDiscardedOnFailure(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/reactor.wasm", wasm.Limits{})
	if !m.Reactor() {
		t.Fatal("reactor.wasm was not recognised as a reactor")
	}
	call := func(request string) (string, error) {
		answer, _, err := m.Call(context.Background(), "permission", []byte(request))
		return string(answer), err
	}
	for i, want := range []string{`{"inits":1,"calls":1}`, `{"inits":1,"calls":2}`} {
		if got, err := call(`{}`); err != nil || got != want {
			t.Fatalf("call %d = %s, %v; want %s (one _initialize, then the instance reused)", i+1, got, err, want)
		}
	}
	if got, err := call(`{"m":"e"}`); err != nil || got != `{"version":1,"m":"e"}` {
		t.Errorf("echo = %s, %v; want the request with its version", got, err)
	}
	// m's time limit is load's minute, so each failure but the loop is
	// decided by its own fault on any load; the loop runs on a second
	// module of the same file whose limit is short.
	loop := load(t, h, "testdata/reactor.wasm", wasm.Limits{Timeout: 300 * time.Millisecond})
	failures := []struct {
		m             *wasm.Module
		request, want string
	}{
		{m, `{"m":"t"}`, "policy module testdata/reactor.wasm trapped: unreachable"},
		{m, `{"m":"o"}`, "acpflow_decide returned 10 bytes at 4293918720, which is outside its memory"},
		{m, `{"z":0}`, "acpflow_alloc(19) returned 0: out of memory?"},
		{m, `{"m":"x"}`, "policy module testdata/reactor.wasm: answer over the 1 MiB limit"},
		{m, `{"m":"g"}`, "went over its memory limit of 32 MiB, then trapped: unreachable"},
		{loop, `{"m":"l"}`, "policy module testdata/reactor.wasm timed out after 300ms"},
	}
	for _, f := range failures {
		if _, _, err := f.m.Call(context.Background(), "permission", []byte(f.request)); err == nil || !strings.Contains(err.Error(), f.want) {
			t.Errorf("Call(%s) = %v, want an error containing %q", f.request, err, f.want)
		}
		// The failed instance is gone: the next call starts a new one.
		if got, _, err := f.m.Call(context.Background(), "permission", []byte(`{}`)); err != nil || string(got) != `{"inits":1,"calls":1}` {
			t.Errorf("after %s: %s, %v; want a fresh instance", f.request, got, err)
		}
	}
}

func TestConcurrentCallsAreIndependent(t *testing.T) {
	h := newHost(t)
	counter := load(t, h, "testdata/counter.wasm", wasm.Limits{})
	reactor := load(t, h, "testdata/reactor.wasm", wasm.Limits{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if a, _, err := counter.Call(context.Background(), "permission", []byte(`{}`)); err != nil || string(a) != `{"calls":1}` {
					errs <- errors.New("counter: " + string(a))
					return
				}
				if a, _, err := reactor.Call(context.Background(), "permission", []byte(`{"m":"e"}`)); err != nil || string(a) != `{"version":1,"m":"e"}` {
					errs <- errors.New("reactor: " + string(a))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The module's own limit is an hour, so only the caller's context can end
// the call: the minute waited for it is a hang guard (600 times the
// context's 100 ms), not a measurement.
func TestACancelledContextStopsTheCall(t *testing.T) {
	h := newHost(t)
	m := load(t, h, "testdata/loop.wasm", wasm.Limits{Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := m.Call(ctx, "permission", []byte(`{}`))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "policy module testdata/loop.wasm stopped: context deadline exceeded") {
			t.Fatalf("Call = %v, want it stopped by the caller's context", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the call still runs a minute after its context ended")
	}
}

func TestWithoutAWritableCacheDirectoryModulesStillLoad(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(notADir, "cache"))
	h := newHost(t)
	if h.CacheDir() != "" {
		t.Errorf("CacheDir() = %q, want none", h.CacheDir())
	}
	m := load(t, h, "testdata/counter.wasm", wasm.Limits{})
	if _, _, err := m.Call(context.Background(), "permission", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

func TestTestdataIsBuiltFromItsSource(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not in PATH (Debian: apt-get install wabt); the committed .wasm files are tested as they are")
	}
	sources, _ := filepath.Glob("testdata/*.wat")
	for _, src := range sources {
		out := filepath.Join(t.TempDir(), "m.wasm")
		if msg, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm %s: %v\n%s", src, err, msg)
		}
		built, _ := os.ReadFile(out)
		committed, _ := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
		if !bytes.Equal(built, committed) {
			t.Errorf("%s is not what wat2wasm builds from %s: rebuild it", strings.TrimSuffix(src, ".wat")+".wasm", src)
		}
	}
}
