package wasm

import (
	"context"
	"os"
	"path/filepath"
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
