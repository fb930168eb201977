package workflows_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

var update = flag.Bool("update", false, "rewrite the .golden files under testdata/invalid")

// invalidFiles lists the broken workflows, one rule each.
func invalidFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid workflows found: %v", err)
	}
	return files
}

// TestInvalidWorkflows checks each broken file's errors against its
// .golden file, byte for byte: position, message and caret lines are the
// user interface of validate. Run with -update to rewrite the goldens, then
// read the diff.
func TestInvalidWorkflows(t *testing.T) {
	for _, file := range invalidFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name+" is rejected as its golden file says", func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wf, err := workflows.Parse(filepath.Base(file), src)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", wf)
			}
			var es workflows.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error is a %T, not workflows.Errors: %v", err, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}
