package outputschema

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

// FuzzOutputSchema feeds any JSON text as an output-schema file and any
// text as an agent's answer. Compiling never panics or hangs, and refuses
// with a *steps.FieldError that says what; a schema it compiles types
// steps.ID.json and checks any answer without a panic, in bounded work;
// and where the walk finishes, it agrees with the library on whether the
// answer matches (it explains the library's verdict).
func FuzzOutputSchema(f *testing.F) {
	for _, seed := range []struct{ schema, answer string }{
		{`{"type": "object", "required": ["approved"], "additionalProperties": false, "properties": {"approved": {"type": "boolean"}, "notes": {"type": "array", "items": {"type": "string"}}}}`, `{"approved": "yes", "notes": [1], "x": 2}`},
		{`{"$ref": "#"}`, `{}`},
		{`{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}}`, `1`},
		{`{"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}`, `{"children": [{"children": []}, 3]}`},
		{`{"$dynamicAnchor": "n", "properties": {"k": {"$dynamicRef": "#n"}}}`, `{"k": {"k": 1}}`},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": false, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}`, `["x", 1]`},
		{`{"anyOf": [{"type": "string"}, {"minimum": 2}], "oneOf": [{"multipleOf": 0.5}, {"maximum": 3}], "not": {"const": 2.5}}`, `2.5`},
		{`{"if": {"required": ["a"]}, "then": {"properties": {"a": {"enum": [1, "x", null, [1], {"k": 2}]}}}, "else": false}`, `{"a": {"k": 2}}`},
		{`{"allOf": [{"properties": {"a": true}}], "unevaluatedProperties": false, "prefixItems": [true], "unevaluatedItems": false, "contains": {"type": "number"}, "minContains": 0}`, `[1, 2]`},
		{`{"patternProperties": {"^x-": {"type": "string"}}, "propertyNames": {"pattern": "^[a-z-]+$"}, "uniqueItems": true, "dependentSchemas": {"a": {"minProperties": 3}}}`, `{"x-a": 1, "B": 2}`},
		{`{"$defs": {"t": {"$id": "t.json", "$anchor": "top", "type": "string"}}, "items": {"$ref": "t.json#top"}}`, `["a", 2]`},
		{`{"$schema": "http://json-schema.org/draft-04/schema#"}`, `1`},
		{`{"type": "bool", "minLength": -1}`, `1`},
		{`true`, `false`},
		{`false`, `null`},
	} {
		f.Add(seed.schema, seed.answer)
	}
	f.Fuzz(func(t *testing.T, schema, answer string) {
		doc, err := decodeJSON([]byte(schema))
		if err != nil {
			return
		}
		compiled, err := compileSchema(doc, []byte(schema), "", "/fuzz")
		if err != nil {
			var fe *steps.FieldError
			if !errors.As(err, &fe) || fe.Err.Error() == "" {
				t.Fatalf("compile: %v (%T), want a *steps.FieldError", err, err)
			}
			return
		}
		compiled.shapeOf()
		o := &Schema{doc: compiled, answer: "the final message"}
		o.Check(answer)

		var v any
		if json.Unmarshal([]byte(answer), &v) != nil {
			return
		}
		w := answerWalk{doc: compiled}
		w.apply(compiled.root, v, nil)
		if w.tooMuch {
			return
		}
		libErr := compiled.validate(v)
		if walkOK := len(w.found) == 0 && w.dropped == 0; walkOK != (libErr == nil) {
			t.Errorf("schema %s\nanswer %s\nthe walk found %v; the library says %v", schema, answer, w.found, libErr)
		}
	})
}
