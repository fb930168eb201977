package workflows_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// structuredFlow is a workflow whose step review declares an output
// schema, and whose step next reads it with the given if: and for-each:.
func structuredFlow(ifExpr, forEach string) string {
	wf := `name: t
agents: {demo: {builtin: demo}}
steps:
  - id: review
    uses: acp-subagent
    with:
      agent: demo
      prompt: hi
      output-schema:
        type: object
        additionalProperties: false
        properties:
          approved: {type: boolean}
          score: {type: integer}
          files: {type: array, items: {type: string}}
          notes: {type: object}
          anything: {}
  - id: plain
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
  - id: next
    needs: [review, plain]
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
`
	if ifExpr != "" {
		wf += "    if: " + ifExpr + "\n"
	}
	if forEach != "" {
		wf += "    for-each: " + forEach + "\n"
	}
	return wf
}

func TestValidateTypesAStepsJSONByItsOutputSchema(t *testing.T) {
	for _, c := range []struct {
		name, ifExpr, forEach string
		want                  string // "" when accepted
	}{
		{"a boolean property is a condition", "steps.review.json.approved", "", ""},
		{"it compares with a boolean", "steps.review.json.approved == true && !steps.review.json.approved", "", ""},
		{"it may be compared with nil", "steps.review.json.approved != nil", "", ""},
		{"an integer is a number", "steps.review.json.score > 2", "", ""},
		{"a list has a length", "len(steps.review.json.files) > 0", "", ""},
		{"what the schema does not type is unknown", `steps.review.json.anything == "yes" && steps.review.json.notes.x == 1`, "", ""},
		{"a step without a schema has a json of unknown type", `steps.plain.json.approved == "yes"`, "", ""},
		{"a list of the schema is a for-each", "", "steps.review.json.files", ""},
		{"a boolean compared with a string is refused", `steps.review.json.approved == "yes"`, "",
			`t.yaml:25:36: step "next": if: invalid operation: == (mismatched types bool and string) (by the types the workflow declares)`},
		{"a number compared with a string is refused", `steps.review.json.score == "2"`, "", "mismatched types float64 and string"},
		{"a string is not a condition", `steps.review.json.files[0]`, "", `if: the condition gives a string, not a boolean; compare it, e.g. steps.review.json.files[0] == "yes"`},
		{"a property the schema closes out is refused", `steps.review.json.aproved`, "", `t.yaml:25:27: step "next": if: unknown field aproved: the output schema allows no property "aproved" (additionalProperties: false)`},
		{"a boolean is not a list", "", "steps.review.json.approved", `for-each: want a list, the expression gives a boolean`},
		{"the declared types refuse other mistakes too", `steps.plain.output > 3`, "", "mismatched types string and int"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := workflows.Parse("t.yaml", []byte(structuredFlow(c.ifExpr, c.forEach)))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("accepted, want %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %v\nwant %q", err, c.want)
			}
		})
	}
}

func TestAStepsOutputSchemaFileIsRelativeToTheWorkflow(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "flows", "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "flows", "schemas", "verdict.json"), []byte(`{"type": "object", "properties": {"ok": {"type": "boolean"}}}`), 0o644)
	path := filepath.Join(dir, "flows", "wf.yaml")
	os.WriteFile(path, []byte(`name: t
agents: {demo: {builtin: demo}}
steps:
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi, output-schema: schemas/verdict.json}}
  - {id: b, needs: a, if: steps.a.json.ok == "yes", uses: acp-subagent, with: {agent: demo, prompt: hi}}
`), 0o644)
	_, err := workflows.Load(path)
	if err == nil || !strings.Contains(err.Error(), "wf.yaml:5:43: step \"b\": if: invalid operation: == (mismatched types bool and string)") {
		t.Fatalf("the schema beside the workflow did not type a.json: %v", err)
	}
	os.WriteFile(path, []byte(`name: t
agents: {demo: {builtin: demo}}
steps:
  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi, output-schema: schemas/verdict.json}}
  - {id: b, needs: a, if: steps.a.json.ok, uses: acp-subagent, with: {agent: demo, prompt: hi}}
`), 0o644)
	wf, err := workflows.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !wf.Steps[0].Structured() || wf.Steps[1].Structured() {
		t.Errorf("structured: a %v, b %v; want a alone", wf.Steps[0].Structured(), wf.Steps[1].Structured())
	}
}
