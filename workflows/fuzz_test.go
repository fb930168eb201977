package workflows_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// FuzzParse checks that no input makes Parse panic, and that every error
// it returns is an Errors with positions inside the file. The hostile
// corpus (testdata/hostile) is among its seeds, so the prescan's bounds
// are fuzzed too.
func FuzzParse(f *testing.F) {
	hostile, _ := filepath.Glob("testdata/hostile/*.yaml")
	for _, files := range [][]string{exampleFiles(f), invalidFiles(f), hostile} {
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	// Small seeds of the bounds the prescan enforces, for the mutator to
	// grow around: nesting at and past the limit, compact entries, a BOM.
	f.Add([]byte("name: t\nsteps: " + strings.Repeat("[", 101) + strings.Repeat("]", 101)))
	f.Add([]byte("name: t\nsteps: " + strings.Repeat("{a: ", 99) + "1" + strings.Repeat("}", 99)))
	f.Add([]byte("name: t\nsteps:\n  " + strings.Repeat("- ", 120) + "x\n"))
	f.Add([]byte("\ufeffname: t\nx: \"[[[\"\ny: |\n  {{{\nsteps: []\n"))
	f.Add([]byte("name: t\nsteps: ['a''b', \"c\\\"[\", {k: [1, 2]}] # [[[\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := workflows.Parse("fuzz.yaml", src)
		if err == nil {
			return
		}
		var es workflows.Errors
		if !errors.As(err, &es) {
			t.Fatalf("error is a %T: %v", err, err)
		}
		text := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(src))
		lines := strings.Count(text, "\n") + 1
		for _, e := range es {
			if strings.Contains(e.Msg, "internal error") {
				t.Fatalf("Parse panicked: %s", e.Msg)
			}
			if e.Line < 0 || e.Line > lines {
				t.Errorf("error at line %d of a %d-line file: %s", e.Line, lines, e.Msg)
			}
		}
		_ = err.Error()
	})
}
