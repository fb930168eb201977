package wasm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAModuleIsCompiledOncePerHostWhateverItsPath(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	bin, err := os.ReadFile("testdata/counter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "renamed.wasm")
	if err := os.WriteFile(copyPath, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	modules := make([]*Module, 16)
	for i := range modules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "testdata/counter.wasm"
			if i%2 == 1 {
				path = copyPath
			}
			m, err := h.Load(ctx, path, Limits{Timeout: DefaultTimeout * time.Duration(1+i%3)})
			if err != nil {
				t.Error(err)
				return
			}
			modules[i] = m
		}()
	}
	wg.Wait()
	if len(h.compiled) != 1 {
		t.Fatalf("%d compilations, want 1", len(h.compiled))
	}
	for i, m := range modules[1:] {
		if m != nil && modules[0] != nil && m.compiled != modules[0].compiled {
			t.Errorf("module %d has its own compiled code", i+1)
		}
	}
}

// blocksModule is a module of funcs functions () -> (), each a body of
// blocks in the given shape, n blocks in all per function.
func blocksModule(shape string, n, funcs int) []byte {
	leb := func(v int) []byte {
		var b []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	section := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, leb(len(body))...), body...)
	}
	body := []byte{0} // no locals
	switch shape {
	case "nested":
		body = append(body, bytes.Repeat([]byte{0x02, 0x40}, n)...)
		body = append(body, bytes.Repeat([]byte{0x0b}, n)...)
	case "flat":
		body = append(body, bytes.Repeat([]byte{0x02, 0x40, 0x0b}, n)...)
	case "loops nested 100 deep":
		for i := 0; i < n/100; i++ {
			body = append(body, bytes.Repeat([]byte{0x03, 0x40}, 100)...)
			body = append(body, bytes.Repeat([]byte{0x0b}, 100)...)
		}
	case "if-else":
		for i := 0; i < n/2; i++ {
			body = append(body, 0x41, 0x00, 0x04, 0x40, 0x05, 0x0b) // i32.const 0; if; else; end
		}
	}
	body = append(body, 0x0b)
	mod := []byte("\x00asm\x01\x00\x00\x00")
	mod = append(mod, section(1, []byte{1, 0x60, 0, 0})...)
	mod = append(mod, section(3, append(leb(funcs), make([]byte, funcs)...))...)
	// a _start export, so that only the size of the code is in question
	mod = append(mod, section(7, []byte{1, 6, '_', 's', 't', 'a', 'r', 't', 0, 0})...)
	code := leb(funcs)
	for i := 0; i < funcs; i++ {
		code = append(append(code, leb(len(body))...), body...)
	}
	return append(mod, section(10, code)...)
}

func writeModule(t *testing.T, bin []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(path, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Unrefused, each of these takes minutes to compile (100,000 blocks: over
// two minutes in any shape); refused, a millisecond.
func TestLoadRefusesAFunctionTooLargeToCompile(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	for _, shape := range []string{"nested", "flat", "loops nested 100 deep", "if-else"} {
		for _, n := range []int{MaxBlocks + 100, 100_000} {
			t.Run(fmt.Sprintf("%s, %d blocks", shape, n), func(t *testing.T) {
				// The error comes from checkStructure, which Load runs
				// before it compiles: the message alone shows that the
				// function was refused without compiling it, on any load.
				_, err := h.Load(ctx, writeModule(t, blocksModule(shape, n, 1)), Limits{})
				if err == nil || !strings.Contains(err.Error(), "function 0 has more than 10000 blocks") {
					t.Errorf("Load = %v, want the function refused", err)
				}
			})
		}
	}
	if testing.Short() {
		return
	}
	start := time.Now()
	if _, err := h.Load(ctx, writeModule(t, blocksModule("nested", 2000, 1)), Limits{}); err != nil {
		t.Errorf("a function of 2000 blocks: %v, want it loaded", err)
	}
	t.Logf("a function of 2000 nested blocks compiled in %s", time.Since(start).Round(time.Millisecond))
}

// A module of many functions just under MaxBlocks takes a second or two
// per function to compile: the load gives up at the time limit, and the
// compile, which wazero checks for cancellation between functions, ends
// soon after.
//
// # Notes
//
// The bounds below are hang guards, not measurements: the whole compile of
// 120 such functions takes over two minutes idle (40 took 82 s at load 25)
// and far longer under load, while the abandoned one ends after the
// function each worker is in. So a load that waited for the compile, or a
// compile that was not abandoned, fails them on any machine, and a busy
// machine does not.
func TestCompileIsAbandonedAtItsTimeLimit(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(ctx, WithCompileTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	path := writeModule(t, blocksModule("flat", MaxBlocks-100, 120))
	for i := 0; i < 2; i++ {
		start := time.Now()
		_, err := h.Load(ctx, path, Limits{})
		if err == nil || !strings.Contains(err.Error(), "does not compile: compiling took longer than the limit of 300ms; it was abandoned") {
			t.Fatalf("load %d = %v, want the compile abandoned at its limit", i+1, err)
		}
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("load %d took %s: it waited for the compile instead of giving up at the limit", i+1, elapsed)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.compiled)
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned compile still runs a minute later: it was not stopped between functions")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
