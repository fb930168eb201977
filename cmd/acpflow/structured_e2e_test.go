package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// Structured output (issue 15): a step's output-schema, the follow-up
// prompts a mismatch gets, and steps.ID.json, through the real binary.

// structuredRun is what a run of these tests did: its exit code and
// stderr, each step's result, and the events.
type structuredRun struct {
	code   int
	stderr string
	runID  string
	steps  map[string]map[string]any
	events []map[string]any
}

// runStructured runs wf in dir with --json, --output and dir's own store.
func runStructured(t *testing.T, dir string, args ...string) structuredRun {
	t.Helper()
	out := filepath.Join(dir, "out.jsonl")
	os.Remove(out)
	r := acpflow(t, dir, append(args, "--json", "--output", out, "--state", filepath.Join(dir, "state.db"))...)
	sr := structuredRun{code: r.code, stderr: r.stderr, events: jsonEvents(t, r.stdout)}
	var res struct {
		RunID string                    `json:"run_id"`
		Steps map[string]map[string]any `json:"steps"`
	}
	if b, err := os.ReadFile(out); err == nil {
		json.Unmarshal(b, &res)
	}
	sr.runID, sr.steps = res.RunID, res.Steps
	return sr
}

// schemaRetries lists the schema_retry events of step.
func (r structuredRun) schemaRetries(step string) []map[string]any {
	var out []map[string]any
	for _, e := range r.events {
		if e["kind"] == "schema_retry" && e["step"] == step {
			out = append(out, e)
		}
	}
	return out
}

// promptTexts are the texts of the prompts the test agent recorded in rec.
func promptTexts(rec string) []string {
	var out []string
	for _, p := range agentrecord.Named(rec, "prompt") {
		out = append(out, agentrecord.PromptText(p))
	}
	return out
}

const verdictSchemaYAML = `
      output-schema:
        type: object
        required: [approved, summary]
        additionalProperties: false
        properties:
          approved: {type: boolean}
          summary: {type: string}`

func TestAnAnswerThatMismatchesIsFollowedUpAndItsJSONDrivesADependantsIf(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "review.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: structured
agents:
  reviewer: {command: %q, args: %s}
  demo: {builtin: demo}
steps:
  - id: review
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: Review the change.%s
  - {id: merge, needs: review, if: steps.review.json.approved, uses: acp-subagent, with: {agent: demo, prompt: "Merge: ${{ steps.review.json.summary }}"}}
  - {id: hold, needs: review, if: "!steps.review.json.approved", uses: acp-subagent, with: {agent: demo, prompt: Hold it.}}
`, testAgent, agentArgs("-record", rec, "-answer", "I looked at it; it is fine.", "-answer", `{"approved": true, "summary": "looks right"}`), verdictSchemaYAML))
	r := runStructured(t, dir, "run", wf, "--workspace", dir)
	assertAgentsGone(t, rec)
	if r.code != 0 {
		t.Fatalf("exit %d: %v\n%s", r.code, r.steps, r.stderr)
	}
	review := r.steps["review"]
	if want := map[string]any{"approved": true, "summary": "looks right"}; !reflect.DeepEqual(review["json"], want) {
		t.Errorf("review's json = %#v, want %#v", review["json"], want)
	}
	if review["final"] != `{"approved": true, "summary": "looks right"}` || review["output"] != "I looked at it; it is fine.\n\n"+review["final"].(string) {
		t.Errorf("output %q, final %q: want both answers in output, the follow-up's alone in final", review["output"], review["final"])
	}
	if r.steps["merge"]["status"] != "succeeded" || r.steps["hold"]["status"] != "skipped" {
		t.Errorf("merge %v, hold %v: want merge run on json.approved, hold skipped", r.steps["merge"]["status"], r.steps["hold"]["status"])
	}
	if out := fmt.Sprint(r.steps["merge"]["output"]); !strings.Contains(out, "Merge: looks right") {
		t.Errorf("merge's prompt did not get json.summary: %q", out)
	}
	if _, has := r.steps["merge"]["json"]; has {
		t.Errorf("a step without output-schema has json in its result: %v", r.steps["merge"]["json"])
	}
	ps := promptTexts(rec)
	if len(ps) != 2 || ps[0] != "Review the change." {
		t.Fatalf("the agent got %d prompts %q, want the step's and one follow-up", len(ps), ps)
	}
	for _, want := range []string{"did not match the JSON Schema", "the final message is neither JSON nor holds a ```json block", `"required":["approved","summary"]`, "Reply with only the corrected JSON value"} {
		if !strings.Contains(ps[1], want) {
			t.Errorf("the follow-up lacks %q:\n%s", want, ps[1])
		}
	}
	if n := len(agentrecord.Named(rec, "start")); n != 1 {
		t.Errorf("%d reviewer processes, want the follow-up on the same one", n)
	}
	sessions := map[any]bool{}
	for _, p := range agentrecord.Named(rec, "prompt") {
		sessions[p["params"].(map[string]any)["sessionId"]] = true
	}
	if len(sessions) != 1 {
		t.Errorf("the prompts went to sessions %v, want one", sessions)
	}
	if sr := r.schemaRetries("review"); len(sr) != 1 || sr[0]["retry"] != 1.0 || sr[0]["retries"] != 1.0 {
		t.Errorf("schema_retry events %v, want one, 1 of 1", sr)
	}

	// The run store keeps the value, for show.
	s := acpflow(t, dir, "show", r.runID, "--json", "--state", filepath.Join(dir, "state.db"))
	var shown struct {
		Steps map[string]map[string]any `json:"steps"`
	}
	if err := json.Unmarshal([]byte(s.stdout), &shown); err != nil || !reflect.DeepEqual(shown.Steps["review"]["json"], review["json"]) {
		t.Errorf("show --json: review's json %v (%v), want %v", shown.Steps["review"]["json"], err, review["json"])
	}
	s = acpflow(t, dir, "show", r.runID, "--state", filepath.Join(dir, "state.db"))
	if !strings.Contains(s.stdout, "  json: {\n    \"approved\": true,\n    \"summary\": \"looks right\"\n  }") {
		t.Errorf("show does not print review's json:\n%s", s.stdout)
	}
}

func TestAnAnswerThatNeverMatchesFailsWithTheErrorsAfterExactlyItsFollowUps(t *testing.T) {
	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprintf("schema-retries %d", retries), func(t *testing.T) {
			dir := t.TempDir()
			rec := filepath.Join(dir, "review.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: never
agents:
  reviewer: {command: %q, args: %s}
steps:
  - id: review
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: Review the change.
      schema-retries: %d%s
`, testAgent, agentArgs("-record", rec, "-answer", `{"approved": "yes", "summary": "fine", "score": 3}`), retries, verdictSchemaYAML))
			r := runStructured(t, dir, "run", wf, "--workspace", dir)
			assertAgentsGone(t, rec)
			review := r.steps["review"]
			if r.code != 1 || review["status"] != "failed" || review["stop_reason"] != "error" {
				t.Fatalf("exit %d, review %v/%v: want 1, failed, error\n%s", r.code, review["status"], review["stop_reason"], r.stderr)
			}
			after := ""
			if retries > 0 {
				after = fmt.Sprintf(" (after %d follow-up prompts)", retries)
			}
			want := "the final message does not match with.output-schema" + after +
				": at '': additional properties 'score' not allowed; at '/approved': got string, want boolean"
			if !strings.HasPrefix(fmt.Sprint(review["error"]), want) {
				t.Errorf("error %q\nwant   %q", review["error"], want)
			}
			if _, has := review["json"]; has {
				t.Errorf("a step that failed its schema has json %v", review["json"])
			}
			ps := promptTexts(rec)
			if len(ps) != 1+retries {
				t.Fatalf("the agent got %d prompts, want %d", len(ps), 1+retries)
			}
			for _, p := range ps[1:] {
				if !strings.Contains(p, "- at '/approved': got string, want boolean\n") {
					t.Errorf("a follow-up does not name the error:\n%s", p)
				}
			}
			if sr := r.schemaRetries("review"); len(sr) != retries {
				t.Errorf("%d schema_retry events, want %d", len(sr), retries)
			}
		})
	}
}

func TestAFencedAnswerMatchesASchemaFileAndResumeReadsItsValueFromTheStore(t *testing.T) {
	dir := t.TempDir()
	flows := filepath.Join(dir, "flows")
	os.MkdirAll(filepath.Join(flows, "schemas"), 0o755)
	os.WriteFile(filepath.Join(flows, "schemas", "verdict.json"), []byte(`{
  "type": "object",
  "required": ["approved", "summary"],
  "properties": {"approved": {"type": "boolean"}, "summary": {"type": "string"}}
}`), 0o644)
	rec, useRec := filepath.Join(dir, "review.jsonl"), filepath.Join(dir, "use.jsonl")
	answer := "Two drafts; the second is the one.\n```json\n{\"approved\": false, \"summary\": \"draft\"}\n```\n" +
		"```json\n{\"approved\": true, \"summary\": \"final\"}\n```\nThat is all."
	body := fmt.Sprintf(`name: fenced
agents:
  reviewer: {command: %q, args: %s}
  user: {command: %q, args: %s}
steps:
  - {id: review, uses: acp-subagent, with: {agent: reviewer, prompt: Review it., output-schema: schemas/verdict.json}}
  - {id: use, needs: review, if: steps.review.json.approved, uses: acp-subagent, with: {agent: user, prompt: "Use ${{ steps.review.json.summary }}", max-output: 10}}
`, testAgent, agentArgs("-record", rec, "-answer", answer), testAgent, agentArgs("-record", useRec))
	wf := filepath.Join(flows, "wf.yaml")
	os.WriteFile(wf, []byte(body), 0o644)
	// From another directory, with the workspace elsewhere: the schema is
	// found beside the workflow.
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	first := runStructured(t, dir, "run", wf, "--workspace", ws)
	if first.code != 1 || first.steps["review"]["status"] != "succeeded" || first.steps["use"]["status"] != "failed" {
		t.Fatalf("first run: exit %d, review %v, use %v (%v): want review to succeed and use to fail its max-output\n%s",
			first.code, first.steps["review"]["status"], first.steps["use"]["status"], first.steps["use"]["error"], first.stderr)
	}
	if want := map[string]any{"approved": true, "summary": "final"}; !reflect.DeepEqual(first.steps["review"]["json"], want) {
		t.Errorf("review's json %v, want the last json block's %v", first.steps["review"]["json"], want)
	}
	if len(first.schemaRetries("review")) != 0 || len(promptTexts(rec)) != 1 {
		t.Errorf("a matching answer was followed up (%d prompts)", len(promptTexts(rec)))
	}

	// Resume runs use again, and only use: the value its if: and prompt
	// read is the one the store kept (review's output is not JSON).
	os.WriteFile(wf, []byte(strings.Replace(body, ", max-output: 10", "", 1)), 0o644)
	second := runStructured(t, dir, "resume", first.runID, "--force")
	assertAgentsGone(t, rec)
	assertAgentsGone(t, useRec)
	if second.code != 0 || second.steps["use"]["status"] != "succeeded" {
		t.Fatalf("resume: exit %d, use %v: %v\n%s", second.code, second.steps["use"]["status"], second.steps["use"]["error"], second.stderr)
	}
	if n := len(agentrecord.Named(rec, "start")); n != 1 {
		t.Errorf("review ran %d times; resume must not run it again", n)
	}
	if ps := promptTexts(useRec); len(ps) != 2 || ps[1] != "Use final" {
		t.Errorf("use's prompts %q, want its resumed one to read review's recorded json (Use final)", ps)
	}
	if !reflect.DeepEqual(second.steps["review"]["json"], first.steps["review"]["json"]) {
		t.Errorf("the resumed run's result has review's json %v, want %v", second.steps["review"]["json"], first.steps["review"]["json"])
	}
}

func TestValidateRefusesAnInvalidOutputSchemaAndAnIfTheSchemaTypesWrongly(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: invalid
agents:
  demo: {builtin: demo}
steps:
  - id: broken
    uses: acp-subagent
    with:
      agent: demo
      prompt: hi
      output-schema: {type: object, required: approved}
  - id: review
    uses: acp-subagent
    with:
      agent: demo
      prompt: hi
      output-schema: {type: object, properties: {approved: {type: boolean}}}
  - id: merge
    needs: review
    if: steps.review.json.approved == "yes"
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
  - id: fine
    needs: review
    if: steps.review.json.approved
    uses: acp-subagent
    with: {agent: demo, prompt: hi}
`)
	r := acpflow(t, dir, "validate", wf)
	if r.code != 2 {
		t.Fatalf("validate: exit %d, want 2\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"wf.yaml:10:47: step \"broken\": with.output-schema is not a valid JSON Schema: at '/required': got string, want array",
		"wf.yaml:19:36: step \"merge\": if: invalid operation: == (mismatched types bool and string)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("validate does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "wf.yaml:"); n != 2 {
		t.Errorf("%d errors, want the two:\n%s", n, r.stderr)
	}
}

// TestValidateAndRunRefuseAnOutputSchemaWhoseRefsGoRound (issue 23): an
// output-schema whose $refs apply it to the same value without end used to
// pass validate and fail every run as if the answer were wrong. Both
// validate and run refuse it now, before any agent starts, at the $ref that
// closes the cycle, naming the cycle: a root that refers to itself, two
// definitions that refer to each other, an allOf back to its schema (each
// written inline), and a schema file's cycle (placed on output-schema,
// naming the file and the place in it). A recursive schema that descends
// through items beside them passes.
func TestValidateAndRunRefuseAnOutputSchemaWhoseRefsGoRound(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "agent.jsonl")
	os.Mkdir(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "loop.json"), []byte(`{
  "type": "object",
  "properties": {"next": {"$ref": "#/$defs/node"}},
  "$defs": {"node": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}
}`), 0o644)
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: cycles
agents:
  reviewer: {command: %q, args: %s}
steps:
  - id: self
    uses: acp-subagent
    with: {agent: reviewer, prompt: hi, output-schema: {$ref: "#"}}
  - id: pair
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: hi
      output-schema:
        $ref: "#/$defs/a"
        $defs:
          a: {$ref: "#/$defs/b"}
          b: {$ref: "#/$defs/a"}
  - id: all
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: hi
      output-schema:
        type: object
        allOf:
          - $ref: "#"
  - id: file
    uses: acp-subagent
    with: {agent: reviewer, prompt: hi, output-schema: schemas/loop.json}
  - id: tree
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: hi
      output-schema:
        type: object
        properties:
          kids: {type: array, items: {$ref: "#"}}
`, testAgent, agentArgs("-record", rec)))
	want := []string{
		`wf.yaml:7:63: step "self": with.output-schema is not a schema acpflow can use: at '/$ref': $ref cycle # -$ref-> #: it applies the same schema to the same value without end`,
		`wf.yaml:16:21: step "pair": with.output-schema is not a schema acpflow can use: at '/$defs/a/$ref': $ref cycle #/$defs/a -$ref-> #/$defs/b -$ref-> #/$defs/a:`,
		`wf.yaml:26:19: step "all": with.output-schema is not a schema acpflow can use: at '/allOf/0/$ref': $ref cycle # -allOf/0-> #/allOf/0 -$ref-> #:`,
		`wf.yaml:29:56: step "file": with.output-schema: ` + filepath.Join(dir, "schemas", "loop.json") + ` is not a schema acpflow can use: at '/$defs/node/anyOf/1/$ref': $ref cycle #/$defs/node -anyOf/1-> #/$defs/node/anyOf/1 -$ref-> #/$defs/node:`,
	}
	for _, args := range [][]string{{"validate", wf}, {"run", wf, "--workspace", dir}} {
		t.Run(args[0], func(t *testing.T) {
			r := acpflow(t, dir, args...)
			if r.code != 2 {
				t.Fatalf("%s: exit %d, want 2\n%s", args[0], r.code, r.stderr)
			}
			for _, w := range want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s does not say\n%s\nit says:\n%s", args[0], w, r.stderr)
				}
			}
			if n := strings.Count(r.stderr, "wf.yaml:"); n != len(want) {
				t.Errorf("%d errors, want the %d cycles (the tree is fine):\n%s", n, len(want), r.stderr)
			}
			if n := len(agentrecord.Named(rec, "start")); n != 0 {
				t.Errorf("%d agents started, want none", n)
			}
			assertAgentsGone(t, rec)
		})
	}
}

// TestARecursiveOutputSchemaChecksANestedAnswerAtEveryLevel: a schema
// that comes back to itself through items validates, and a run checks the
// agent's answer at every level of the tree: a mismatch deep in it is
// followed up naming its place, and the corrected tree is the step's json.
func TestARecursiveOutputSchemaChecksANestedAnswerAtEveryLevel(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "agent.jsonl")
	bad := `{"name": "root", "kids": [{"name": "a", "kids": [{"name": 7}]}]}`
	good := `{"name": "root", "kids": [{"name": "a", "kids": [{"name": "b"}]}]}`
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: tree
agents:
  reviewer: {command: %q, args: %s}
steps:
  - id: tree
    uses: acp-subagent
    with:
      agent: reviewer
      prompt: Draw the tree.
      output-schema:
        $ref: "#/$defs/node"
        $defs:
          node:
            type: object
            required: [name]
            additionalProperties: false
            properties:
              name: {type: string}
              kids: {type: array, items: {$ref: "#/$defs/node"}}
`, testAgent, agentArgs("-record", rec, "-answer", bad, "-answer", good)))
	if r := acpflow(t, dir, "validate", wf); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
	}
	r := runStructured(t, dir, "run", wf, "--workspace", dir)
	assertAgentsGone(t, rec)
	if r.code != 0 {
		t.Fatalf("exit %d: %v\n%s", r.code, r.steps, r.stderr)
	}
	var want any
	json.Unmarshal([]byte(good), &want)
	if !reflect.DeepEqual(r.steps["tree"]["json"], want) {
		t.Errorf("json %v, want %v", r.steps["tree"]["json"], want)
	}
	ps := promptTexts(rec)
	if len(ps) != 2 || !strings.Contains(ps[1], "- at '/kids/0/kids/0/name': got number, want string\n") {
		t.Errorf("the follow-up does not name the deep mismatch: %q", ps)
	}
}
