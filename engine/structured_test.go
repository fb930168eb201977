package engine_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/testagent/record"
)

// runRecorded is run with every agent recording to a file of its own (its
// command is AGENT, its args' REC/NAME a path in a temporary directory),
// and then proves each agent and what it started gone.
func runRecorded(t *testing.T, yaml string, opt engine.Options) *engine.RunResult {
	t.Helper()
	dir := t.TempDir()
	res, _ := run(t, strings.ReplaceAll(yaml, "REC/", dir+"/"), opt)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		record.AssertGone(t, f)
	}
	return res
}

// verdictSchema is the with: tail of a step whose answer must be a verdict.
const verdictSchema = `output-schema: {type: object, required: [approved], properties: {approved: {type: boolean}, n: {type: integer}}}`

func TestAStructuredStepsJSONIsItsCheckedValue(t *testing.T) {
	res := runRecorded(t, `
name: structured
agents:
  check: {command: AGENT, args: ["-record", "REC/check.jsonl", "-answer", "Verdict:\n`+"```json"+`\n{\"approved\": true, \"n\": 3}\n`+"```"+`"]}
  plain: {command: AGENT, args: ["-record", "REC/plain.jsonl", "-answer", "{\"approved\": false}"]}
  after: {command: AGENT, args: ["-record", "REC/after.jsonl"]}
steps:
  - {id: check, uses: acp-subagent, with: {agent: check, prompt: go, `+verdictSchema+`}}
  - {id: plain, uses: acp-subagent, with: {agent: plain, prompt: go}}
  - {id: approved, needs: [check], if: steps.check.json.approved, uses: acp-subagent, with: {agent: after, prompt: "n=${{ steps.check.json.n }}"}}
  - {id: many, needs: [check], if: steps.check.json.n > 5, uses: acp-subagent, with: {agent: after, prompt: x}}
  - {id: old, needs: [plain], if: "!steps.plain.json.approved", uses: acp-subagent, with: {agent: after, prompt: x}}
outputs:
  verdict: ${{ steps.check.json }}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s: %s %s", res.Status, res.Error, statuses(res))
	}
	if got := statuses(res); got != "approved=succeeded check=succeeded many=skipped old=succeeded plain=succeeded" {
		t.Errorf("statuses %s", got)
	}
	if want := map[string]any{"approved": true, "n": 3.0}; !reflect.DeepEqual(res.Steps["check"].JSON, want) {
		t.Errorf("check's json %#v, want %#v", res.Steps["check"].JSON, want)
	}
	if res.Steps["plain"].JSON != nil {
		t.Errorf("a step without output-schema has json %#v in its result", res.Steps["plain"].JSON)
	}
	if res.Outputs["verdict"] != `{"approved":true,"n":3}` {
		t.Errorf("outputs %v", res.Outputs)
	}
}

func TestAStructuredStepThatDidNotMatchHasNoJSON(t *testing.T) {
	// The answer is JSON, but not the schema's: a dependant that goes on
	// (continue-on-error) sees nil, never the value that failed the check.
	res := runRecorded(t, `
name: mismatch
agents:
  check: {command: AGENT, args: ["-record", "REC/check.jsonl", "-answer", "{\"approved\": \"yes\"}"]}
  after: {command: AGENT, args: ["-record", "REC/after.jsonl"]}
steps:
  - {id: check, continue-on-error: true, uses: acp-subagent, with: {agent: check, prompt: go, schema-retries: 0, `+verdictSchema+`}}
  - {id: after, needs: [check], if: steps.check.json == nil, uses: acp-subagent, with: {agent: after, prompt: x}}
`, engine.Options{})
	if got := statuses(res); got != "after=succeeded check=failed" {
		t.Errorf("statuses %s (%s)", got, res.Steps["check"].Error)
	}
}

func TestAStructuredForEachHasAListOfValues(t *testing.T) {
	res := runRecorded(t, `
name: each
agents:
  check: {command: AGENT, args: ["-record", "REC/check.jsonl", "-answer", "{\"approved\": true}"]}
steps:
  - {id: check, for-each: "1..2", uses: acp-subagent, with: {agent: check, prompt: "${{ item }}", `+verdictSchema+`}}
  - {id: all, needs: [check], if: "all(steps.check.json, .approved)", uses: acp-subagent, with: {agent: check, prompt: x}}
`, engine.Options{})
	if got := statuses(res); got != "all=succeeded check=succeeded" {
		t.Errorf("statuses %s", got)
	}
	want := []any{map[string]any{"approved": true}, map[string]any{"approved": true}}
	if !reflect.DeepEqual(res.Steps["check"].JSON, want) {
		t.Errorf("json %#v", res.Steps["check"].JSON)
	}
}

func TestAResumedRunReadsAStructuredStepsRecordedValue(t *testing.T) {
	// The recorded output is not JSON: only the recorded value can say
	// approved.
	done := map[string]*engine.StepResult{
		"check": {Status: engine.StatusSucceeded, StopReason: "completed", Output: "Verdict: yes", Attempts: 1,
			JSON: map[string]any{"approved": true}},
	}
	res := runRecorded(t, `
name: resumed
agents:
  a: {command: AGENT, args: ["-record", "REC/a.jsonl"]}
steps:
  - {id: check, uses: acp-subagent, with: {agent: a, prompt: go, `+verdictSchema+`}}
  - {id: after, needs: [check], if: steps.check.json.approved, uses: acp-subagent, with: {agent: a, prompt: x}}
`, engine.Options{Done: done})
	if got := statuses(res); got != "after=succeeded check=succeeded" {
		t.Errorf("statuses %s", got)
	}
}
