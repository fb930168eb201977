package wasm

import (
	"os"
	"path/filepath"
	"testing"
)

// The walk must understand what compilers write (it walks every function
// of the examples to its end) and find them far below the limit.
func TestExamplesHaveFarFewerBlocksThanTheLimit(t *testing.T) {
	paths, _ := filepath.Glob("examples/prebuilt/*.wasm")
	if len(paths) == 0 {
		t.Fatal("no prebuilt examples")
	}
	for _, p := range paths {
		bin, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		most, err := mostBlocks(bin)
		if err != nil || most == 0 || most > MaxBlocks/10 {
			t.Errorf("%s: at most %d blocks in a function (%v), want some, and far below %d", p, most, err, MaxBlocks)
		}
	}
}
