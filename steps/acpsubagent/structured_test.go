package acpsubagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/outputschema"
)

// approval is the schema most tests here check answers against.
var approval = map[string]any{
	"type":                 "object",
	"required":             []any{"approved"},
	"additionalProperties": false,
	"properties": map[string]any{
		"approved": map[string]any{"type": "boolean"},
		"notes":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	},
}

func mustSchema(t *testing.T, with map[string]any) *outputSchema {
	t.Helper()
	o, err := prepareOutputSchema(with, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestWhatIsWrongIsBounded(t *testing.T) {
	props := map[string]any{}
	answer := map[string]string{}
	for _, name := range strings.Split("a b c d e f g h i j k l m n", " ") {
		props[name] = map[string]any{"type": "boolean"}
		answer[name] = strings.Repeat("x", 1000)
	}
	o := mustSchema(t, map[string]any{"output-schema": map[string]any{"type": "object", "properties": props}})
	var b strings.Builder
	b.WriteString("{")
	i := 0
	for name, v := range answer {
		if i > 0 {
			b.WriteString(",")
		}
		i++
		b.WriteString(`"` + name + `":"` + v + `"`)
	}
	b.WriteString("}")
	_, problems := o.Check(b.String())
	if len(problems) != outputschema.MaxProblems || problems[outputschema.MaxProblems-1] != "… and 5 more" {
		t.Errorf("%d problems, the last %q; want %d ending with … and 5 more", len(problems), problems[len(problems)-1], outputschema.MaxProblems)
	}
	err := o.mismatch(problems)
	if n := len(err.Error()); n > outputschema.MaxProblems*(outputschema.MaxProblemBytes+2)+200 {
		t.Errorf("the step's error is %d bytes", n)
	}
	if !strings.HasPrefix(err.Error(), "the final message does not match with.output-schema (after 1 follow-up prompt): at '/") {
		t.Errorf("error %q", err)
	}
	prompt := o.followUp(problems)
	for _, want := range []string{"did not match the JSON Schema", "- at '/", "The schema:\n{", "Reply with only the corrected JSON value"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the follow-up prompt lacks %q:\n%s", want, prompt)
		}
	}
}

func TestTheSchemaIsInlineOrAFileBesideTheWorkflow(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("schemas/ok.json", `{"type": "object", "properties": {"n": {"type": "integer"}}}`)
	write("schemas/broken.json", "{\n  \"type\": \"object\",\n  \"properties\": {,}\n}")
	write("schemas/bad.json", `{"type": "object", "properties": {"n": {"type": "int"}}}`)
	write("schemas/remote.json", `{"$ref": "other.json"}`)
	os.MkdirAll(filepath.Join(dir, "schemas", "dir.json"), 0o755)

	if o, err := prepareOutputSchema(map[string]any{"output-schema": "schemas/ok.json"}, dir); err != nil || o.retries != 1 || o.Shape().Properties["n"].Type != "number" {
		t.Fatalf("a file relative to the workflow: %+v, %v", o, err)
	}
	if o, err := prepareOutputSchema(map[string]any{"output-schema": filepath.Join(dir, "schemas/ok.json"), "schema-retries": 0}, "/elsewhere"); err != nil || o.retries != 0 {
		t.Fatalf("an absolute file: %+v, %v", o, err)
	}
	if o, err := prepareOutputSchema(map[string]any{"agent": "x"}, dir); o != nil || err != nil {
		t.Fatalf("no output-schema: %+v, %v", o, err)
	}
	for _, c := range []struct {
		name string
		with map[string]any
		path []string
		msg  string
	}{
		{"a missing file", map[string]any{"output-schema": "schemas/missing.json"},
			[]string{"with", "output-schema"}, "the schema file " + filepath.Join(dir, "schemas/missing.json") + " does not exist"},
		{"a directory", map[string]any{"output-schema": "schemas/dir.json"},
			[]string{"with", "output-schema"}, "is not a regular file (a directory)"},
		{"a file that is not JSON says where", map[string]any{"output-schema": "schemas/broken.json"},
			[]string{"with", "output-schema"}, "broken.json:3:18 is not JSON"},
		{"a file that is not a schema names the keyword", map[string]any{"output-schema": "schemas/bad.json"},
			[]string{"with", "output-schema"}, "bad.json is not a valid JSON Schema: at '/properties/n/type': value must be one of"},
		{"a reference to another document", map[string]any{"output-schema": "schemas/remote.json"},
			[]string{"with", "output-schema"}, "acpflow loads no other schema documents"},
		{"an inline schema error is placed on its value", map[string]any{"output-schema": map[string]any{"properties": map[string]any{"ok": map[string]any{"type": "bool"}}}},
			[]string{"with", "output-schema", "properties", "ok", "type"}, "with.output-schema is not a valid JSON Schema: at '/properties/ok/type': value must be one of 'array', 'boolean'"},
		{"a dangling pointer is placed on its $ref", map[string]any{"output-schema": map[string]any{"$ref": "#/$defs/nope"}},
			[]string{"with", "output-schema", "$ref"}, `with.output-schema is not a valid JSON Schema: at '/$ref': $ref '#/$defs/nope': no schema at '/$defs/nope'`},
		{"no templates in a schema", map[string]any{"output-schema": map[string]any{"description": "for ${{ inputs.x }}"}},
			[]string{"with", "output-schema", "description"}, "cannot hold ${{ }}"},
		{"no template for a file", map[string]any{"output-schema": "${{ inputs.schema }}"},
			[]string{"with", "output-schema"}, "must name a file as written"},
		{"neither a mapping nor a path", map[string]any{"output-schema": []any{"x"}},
			[]string{"with", "output-schema"}, "want a JSON Schema (a mapping) or the path of a JSON file holding one, got a list"},
		{"an empty path", map[string]any{"output-schema": ""}, []string{"with", "output-schema"}, "is empty"},
		{"schema-retries alone", map[string]any{"schema-retries": 2}, []string{"with", "schema-retries"}, "needs with.output-schema"},
		{"too many retries", map[string]any{"output-schema": approval, "schema-retries": 11}, []string{"with", "schema-retries"}, "want a whole number from 0 to 10"},
		{"negative retries", map[string]any{"output-schema": approval, "schema-retries": -1}, []string{"with", "schema-retries"}, "want a whole number from 0 to 10"},
		{"retries as text", map[string]any{"output-schema": approval, "schema-retries": "2"}, []string{"with", "schema-retries"}, `got the string "2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := prepareOutputSchema(c.with, dir)
			var fe *steps.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want a *steps.FieldError", err, err)
			}
			if !reflect.DeepEqual(fe.Path, c.path) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error at %q: %v\nwant at %q, containing %q", fe.Path, err, c.path, c.msg)
			}
		})
	}
}

func TestAMismatchedAnswerIsFollowedUpInTheSameSessionOnTheSameProcess(t *testing.T) {
	h := newHarness(t, "-session-id", "ta-1", "-answer", "I approve.", "-answer", "```json\n{\"approved\": true}\n```")
	h.with["output-schema"] = approval
	res := h.run(context.Background())
	if res.StopReason != steps.Completed || res.Err != nil {
		t.Fatalf("stop reason %s, err %v", res.StopReason, res.Err)
	}
	if !reflect.DeepEqual(res.JSON, map[string]any{"approved": true}) {
		t.Errorf("json = %#v", res.JSON)
	}
	if res.Final != "```json\n{\"approved\": true}\n```" || res.Output != "I approve.\n\n"+res.Final {
		t.Errorf("output %q, final %q: want both answers in output, the follow-up's alone in final", res.Output, res.Final)
	}
	if n := len(h.recorded("start")); n != 1 {
		t.Errorf("%d agent processes, want 1", n)
	}
	prompts := h.recorded("prompt")
	if len(prompts) != 2 {
		t.Fatalf("%d prompts, want the step's and one follow-up", len(prompts))
	}
	for _, p := range prompts {
		if sid := p["params"].(map[string]any)["sessionId"]; sid != "ta-1" {
			t.Errorf("a prompt went to session %v, want ta-1", sid)
		}
	}
	follow := record.PromptText(prompts[1])
	if !strings.Contains(follow, "the final message is neither JSON nor holds a ```json block") {
		t.Errorf("the follow-up does not say what was wrong:\n%s", follow)
	}
	var retries []acpagent.SchemaRetry
	for _, e := range h.events.all {
		if r, ok := e.Data.(acpagent.SchemaRetry); ok {
			retries = append(retries, r)
		}
	}
	if len(retries) != 1 || retries[0].Retry != 1 || retries[0].Retries != 1 {
		t.Errorf("schema_retry events %+v, want one, 1 of 1", retries)
	}
	if k := h.events.kinds(); strings.Count(strings.Join(k, ","), "schema_retry") != 1 {
		t.Errorf("kinds %v", k)
	}
}

func TestAnAnswerThatNeverMatchesFailsAfterItsFollowUps(t *testing.T) {
	for _, retries := range []int{0, 1, 3} {
		t.Run(strings.Repeat("follow-up ", retries)+"then the step fails", func(t *testing.T) {
			h := newHarness(t, "-answer", `{"approved": "yes"}`)
			h.with["output-schema"] = approval
			h.with["schema-retries"] = retries
			res := h.run(context.Background())
			if res.StopReason != steps.Error || res.Err == nil || res.JSON != nil {
				t.Fatalf("stop reason %s, err %v, json %v: want an error and no value", res.StopReason, res.Err, res.JSON)
			}
			if !strings.Contains(res.Err.Error(), "does not match with.output-schema") || !strings.Contains(res.Err.Error(), "at '/approved': got string, want boolean") {
				t.Errorf("error %q does not say what is wrong", res.Err)
			}
			if n := len(h.recorded("prompt")); n != 1+retries {
				t.Errorf("%d prompts, want %d", n, 1+retries)
			}
		})
	}
}

func TestAFollowUpCountsTowardTheStepsTimeout(t *testing.T) {
	h := newHarness(t, "-answer", "no JSON here", "-prompt-delay", "2s")
	h.with["output-schema"] = approval
	// The step's timeout, as the engine ends a step's context, comes once
	// the follow-up has been sent (an event, not a timer racing the spawn
	// and the first turn on a loaded machine); the follow-up's answer
	// would take two seconds more.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		waitFor(t, func() bool { return len(h.recorded("prompt")) == 2 })
		cancel(errors.New("step timed out after 450ms"))
	}()
	res := h.run(ctx)
	if res.StopReason != steps.Aborted || res.Err == nil || !strings.Contains(res.Err.Error(), "step timed out") {
		t.Fatalf("stop reason %s, err %v: want the follow-up aborted by the timeout", res.StopReason, res.Err)
	}
	if n := len(h.recorded("prompt")); n != 2 {
		t.Errorf("%d prompts, want the step's and the follow-up the timeout cut", n)
	}
}
