package workflows_test

import (
	"path/filepath"
	"testing"

	_ "github.com/acpflow/acpflow/policies/wasmpolicy"
	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	_ "github.com/acpflow/acpflow/steps/shell"
	"github.com/acpflow/acpflow/workflows"
)

// exampleFiles lists the shipped example workflows, the cookbook's
// (examples/cookbook/, docs/cookbook.md) included.
func exampleFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("examples/*.yaml")
	more, err2 := filepath.Glob("examples/*/*.yaml")
	if err != nil || err2 != nil || len(files) == 0 || len(more) == 0 {
		t.Fatalf("no examples found: %v %v", err, err2)
	}
	return append(files, more...)
}

func TestEveryExampleLoads(t *testing.T) {
	for _, file := range exampleFiles(t) {
		t.Run(filepath.Base(file)+" loads without error", func(t *testing.T) {
			wf, err := workflows.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range wf.Steps {
				if s.Run == nil {
					t.Errorf("step %s was not prepared", s.ID)
				}
			}
		})
	}
}
