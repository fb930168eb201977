package workflows_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// manySteps is a workflow of n steps: a chain where every fourth step fans
// out to three that need it, and every step's prompt reads its parent and
// the input through templates, so the reference checks walk long ancestries.
func manySteps(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\ninputs:\n  task: {type: string, default: go}\nagents:\n  demo: {builtin: demo}\nsteps:\n")
	parent := ""
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		fmt.Fprintf(&b, "  - id: %s\n    uses: acp-subagent\n", id)
		if parent != "" {
			fmt.Fprintf(&b, "    needs: [%s]\n    if: steps.%s.status == \"succeeded\"\n", parent, parent)
		}
		b.WriteString("    with:\n      agent: demo\n      prompt: |\n")
		fmt.Fprintf(&b, "        Step %d of ${{ inputs.task }}.\n", i)
		if parent != "" {
			fmt.Fprintf(&b, "        Before: ${{ steps.%s.output }} (${{ steps.%s.stop_reason }})\n", parent, parent)
		}
		if i%4 == 0 {
			parent = id
		}
	}
	b.WriteString("outputs:\n  last: ${{ steps.s199.output }}\n")
	return []byte(b.String())
}

func BenchmarkValidate200Steps(b *testing.B) {
	src := manySteps(200)
	if _, err := workflows.Parse("big.yaml", src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := workflows.Parse("big.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}

func TestALargeWorkflowIsValid(t *testing.T) {
	wf, err := workflows.Parse("big.yaml", manySteps(200))
	if err != nil {
		t.Fatal(err)
	}
	if len(wf.Steps) != 200 {
		t.Errorf("%d steps, want 200", len(wf.Steps))
	}
}
