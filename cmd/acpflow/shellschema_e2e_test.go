package main

import (
	"strings"
	"testing"
)

// A shell step's `output-schema:` checks its stdout as an agent step's
// checks the final message: a command whose stdout matches gives its value
// to the next step as steps.ID.json (typed by the schema in validate); one
// that does not fails the step, saying where; a command that fails is not
// checked. The class of input: the schema inline and in a file, on the
// step (run: shorthand) and under with:, stdout that is JSON, that holds a
// ```json block, that mismatches, and a typo on the value caught by
// validate.
func TestAShellStepsStdoutIsCheckedAgainstItsOutputSchema(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "count.schema.json", `{"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}}`)
	r := runShellWorkflow(t, dir, strings.ReplaceAll(`name: schema
steps:
  - id: tally
    run: |
      echo '{"count": 3, "files": ["a", "b", "c"]}'
    output-schema: count.schema.json
  - id: report
    uses: shell
    with:
      run: |
        printf 'Counted:\nFENCEjson\n{"ok": true}\nFENCE\n'
      output-schema: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
  - id: use
    needs: [tally, report]
    run: echo "${{ steps.tally.json.count * 2 }} ${{ steps.report.json.ok }}"
  - id: wrong
    run: |
      echo '{"count": "three"}'
    output-schema: count.schema.json
    continue-on-error: true
  - id: broken
    run: |
      echo '{"count": "three"}'; exit 3
    output-schema: count.schema.json
    continue-on-error: true
`, "FENCE", "```"))
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (the failed steps may fail)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := r.res.Steps["use"]; got.Status != "succeeded" || strings.TrimSpace(got.Output.(string)) != "6 true" {
		t.Errorf("use: %s %q, want the two values read as JSON: 6 true", got.Status, got.Output)
	}
	if got := r.res.Steps["wrong"]; got.Status != "failed" || !strings.Contains(got.Error, "stdout does not match with.output-schema: at '/count': got string, want integer") {
		t.Errorf("wrong: %s %q", got.Status, got.Error)
	}
	if got := r.res.Steps["broken"]; got.Status != "failed" || !strings.Contains(got.Error, "exited with code 3") || strings.Contains(got.Error, "output-schema") {
		t.Errorf("broken: %s %q, want the exit named and no schema check", got.Status, got.Error)
	}

	writeWorkflow(t, dir, `name: typed
steps:
  - id: tally
    run: |
      echo '{"count": 3}'
    output-schema: {type: object, properties: {count: {type: integer}}, additionalProperties: false}
  - id: use
    needs: [tally]
    if: steps.tally.json.cuont > 1
    run: echo many
`)
	v := acpflow(t, dir, "validate", "wf.yaml")
	if v.code != 2 || !strings.Contains(v.stdout+v.stderr, `unknown field cuont: the output schema allows no property "cuont"`) {
		t.Errorf("validate of a typo on a typed value: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}
