package workflows_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// FuzzParse checks that no input makes Parse panic, and that every error
// it returns is an Errors with positions inside the file.
func FuzzParse(f *testing.F) {
	for _, files := range [][]string{exampleFiles(f), invalidFiles(f)} {
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
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
