package workflows_test

import (
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// TestCommentsAndQuotesStillWork: the rewording of a cut expression
// (wording.go) fires only on an expression that fails to compile; a real
// comment after a whole expression, and " #" inside a quoted one, are
// accepted as before.
func TestCommentsAndQuotesStillWork(t *testing.T) {
	src := `name: t
agents:
  demo: {builtin: demo}
policies:
  permission:
    rules:
      - if: tool.kind == "read"  # reads are safe
        then: allow
      - if: 'tool.title contains " #"'
        then: reject
    default: reject
steps:
  - id: a
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
  - id: b
    needs: a
    if: steps.a.status == "succeeded" # only after a
    uses: acp-subagent
    with:
      agent: demo
      prompt: "${{ steps.a.output contains ' #1' }}"
  - id: c
    needs: a
    if: "steps.a.output contains \" #wontfix\""
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
`
	if _, err := workflows.Parse("t.yaml", []byte(src)); err != nil {
		t.Fatalf("rejected a valid workflow:\n%v", err)
	}
}
