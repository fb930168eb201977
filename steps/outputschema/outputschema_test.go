package outputschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

func mustSchema(t *testing.T, with map[string]any) *Schema {
	t.Helper()
	o, err := Prepare(with, t.TempDir(), "the final message")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

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

func TestTheAnswerIsTheWholeFinalMessageOrItsLastJSONBlock(t *testing.T) {
	for _, c := range []struct {
		name, final, want, err string
	}{
		{"a JSON message is the answer", `{"approved": true}`, `{"approved": true}`, ""},
		{"space around it does not matter", "\n  [1, 2]\n\n", "[1, 2]", ""},
		{"a JSON string is an answer too", `"yes"`, `"yes"`, ""},
		{"a json block in prose", "Here it is:\n```json\n{\"approved\": false}\n```\nDone.", `{"approved": false}`, ""},
		{"the last json block wins", "First:\n```json\n{\"v\": 1}\n```\nBetter:\n```json\n{\"v\": 2}\n```", `{"v": 2}`, ""},
		{"JSON in any case, with more info", "```JSON title\n{\"v\": 3}\n```", `{"v": 3}`, ""},
		{"a longer fence holds backticks", "````json\n{\"s\": \"```\"}\n````", "{\"s\": \"```\"}", ""},
		{"an indented fence", "  ```json\n  {\"v\": 4}\n  ```", `  {"v": 4}`, ""},
		{"an unclosed block runs to the end", "```json\n{\"v\": 5}", `{"v": 5}`, ""},
		{"a block of another language is not the answer", "```go\nx := 1\n```\n```json\n{\"v\": 6}\n```\n```yaml\nv: 7\n```", `{"v": 6}`, ""},
		{"a json fence inside another block is text", "```text\n```json\n{\"v\": 8}\n```\n", "", "neither JSON nor holds"},
		{"CRLF lines", "ok\r\n```json\r\n{\"v\": 9}\r\n```\r\n", "{\"v\": 9}\r", ""},
		{"prose alone", "I approve.", "", "neither JSON nor holds a ```json block"},
		{"an empty message", "  \n", "", "the final message is empty"},
		{"broken JSON says where", "{\"approved\": true,\n \"notes\": [}", "", "the final message is not JSON: invalid character '}' looking for beginning of value (line 2, column 12)"},
		{"a broken block says so", "```json\n{\"approved\": }\n```", "", "the last ```json block of the final message is not JSON"},
		{"a fence mid-line is no fence", "Use a ```json block: {\"v\": 1}", "", "neither JSON nor holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := answerJSON(c.final, "the final message")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("answerJSON = %q, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("answerJSON = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestAnAnswerIsCheckedAgainstTheSchema(t *testing.T) {
	o := mustSchema(t, map[string]any{"output-schema": approval})
	for _, c := range []struct {
		name, final string
		value       any
		problems    []string
	}{
		{"a matching answer is the value, decoded as expressions see JSON", "```json\n{\"approved\": true, \"notes\": [\"ok\"]}\n```",
			map[string]any{"approved": true, "notes": []any{"ok"}}, nil},
		{"every mismatch is named by where it is, sorted by place", `{"approved": "yes", "notes": [1], "extra": 2}`, nil, []string{
			"at '': additional properties 'extra' not allowed",
			"at '/approved': got string, want boolean",
			"at '/notes/0': got number, want string",
		}},
		{"a missing property", `{}`, nil, []string{"at '': missing property 'approved'"}},
		{"prose is not an answer", "Looks good to me.", nil, []string{"the final message is neither JSON nor holds a ```json block"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, problems := o.Check(c.final)
			if !reflect.DeepEqual(v, c.value) || !reflect.DeepEqual(problems, c.problems) {
				t.Errorf("check = %#v, %q\nwant  %#v, %q", v, problems, c.value, c.problems)
			}
		})
	}
}

func TestTheSchemaSaysWhatTheValueHolds(t *testing.T) {
	o := mustSchema(t, map[string]any{"output-schema": map[string]any{
		"$defs": map[string]any{"tag": map[string]any{"type": "string"}},
		"type":  "object",
		"properties": map[string]any{
			"approved": map[string]any{"type": "boolean"},
			"score":    map[string]any{"type": "integer"},
			"tags":     map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/tag"}},
			"maybe":    map[string]any{"type": []any{"string", "null"}},
			"either":   map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}},
			"counts":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "number"}},
			"closed":   map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}, "additionalProperties": false},
			"tree":     map[string]any{"$ref": "#"},
		},
	}})
	sh := o.shape
	if sh.Type != "object" || sh.Closed {
		t.Fatalf("root %+v", sh)
	}
	p := sh.Properties
	for name, want := range map[string]string{"approved": "boolean", "score": "number", "tags": "array", "maybe": "", "either": "", "counts": "object", "closed": "object", "tree": "object"} {
		if p[name] == nil || p[name].Type != want {
			t.Errorf("%s: %+v, want type %q", name, p[name], want)
		}
	}
	if p["tags"].Items == nil || p["tags"].Items.Type != "string" {
		t.Errorf("tags' items %+v, want strings (through $ref)", p["tags"].Items)
	}
	if p["counts"].Others == nil || p["counts"].Others.Type != "number" || p["counts"].Closed {
		t.Errorf("counts %+v: want other properties numbers", p["counts"])
	}
	if !p["closed"].Closed || p["closed"].Properties["a"].Type != "string" {
		t.Errorf("closed %+v", p["closed"])
	}
	// A recursive schema ends: its depth is bounded by a budget.
	var depth int
	for n := sh; n != nil && n.Type == "object"; n = n.Properties["tree"] {
		depth++
	}
	if depth < 2 || depth > maxShapeNodes {
		t.Errorf("the recursive tree is %d levels deep", depth)
	}
}

// compileInline compiles an inline schema written as JSON, for tables.
func compileInline(t *testing.T, schema string) (*Schema, error) {
	t.Helper()
	var m any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatalf("the test's schema %s: %v", schema, err)
	}
	return Prepare(map[string]any{"output-schema": m}, t.TempDir(), "the final message")
}

// TestASchemaIsReadByTheDraftItNames covers $schema: none (2020-12), the
// two drafts the library reads in every spelling of their URIs, drafts it
// does not read, and a subschema naming another draft than the root.
func TestASchemaIsReadByTheDraftItNames(t *testing.T) {
	// Under 2020-12 prefixItems checks a tuple and $ref's siblings apply;
	// under draft-07 items does and $ref stands alone.
	tuple2020 := `"prefixItems": [{"type": "number"}, {"type": "number"}]`
	tuple07 := `"items": [{"type": "number"}, {"type": "number"}], "additionalItems": false`
	refBeside := `"$ref": "#/definitions/s", "type": "number", "definitions": {"s": {"type": "string"}}`
	for _, c := range []struct {
		name, schema, answer string
		want                 []string
	}{
		{"no $schema is 2020-12: prefixItems is the tuple", `{` + tuple2020 + `}`, `[1, "x"]`, []string{"at '/1': got string, want number"}},
		{"2020-12 named as the library spells it", `{"$schema": "https://json-schema.org/draft/2020-12/schema", ` + tuple2020 + `}`, `[1, "x"]`, []string{"at '/1': got string, want number"}},
		{"2020-12 over http with an empty fragment", `{"$schema": "http://json-schema.org/draft/2020-12/schema#", ` + tuple2020 + `}`, `[1, "x"]`, []string{"at '/1': got string, want number"}},
		{"under 2020-12 $ref's siblings apply", `{` + refBeside + `}`, `"x"`, []string{"at '': got string, want number"}},
		{"draft-07 as the library spells it: items is the tuple", `{"$schema": "http://json-schema.org/draft-07/schema#", ` + tuple07 + `}`, `[1, "x", 3]`,
			[]string{"at '': got 3 items, want at most 2", "at '/1': got string, want number"}},
		{"draft-07 without the fragment, over https", `{"$schema": "https://json-schema.org/draft-07/schema", ` + tuple07 + `}`, `[1, 2]`, nil},
		{"under draft-07 $ref stands alone", `{"$schema": "http://json-schema.org/draft-07/schema#", ` + refBeside + `}`, `"x"`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := compileInline(t, c.schema)
			if err != nil {
				t.Fatal(err)
			}
			if _, problems := o.Check(c.answer); !reflect.DeepEqual(problems, c.want) {
				t.Errorf("problems %q, want %q", problems, c.want)
			}
		})
	}
	for _, c := range []struct {
		name, schema string
		path         []string
		msg          string
	}{
		{"draft-04 is not read", `{"$schema": "http://json-schema.org/draft-04/schema#"}`, []string{"$schema"},
			"with.output-schema is not a valid JSON Schema: at '/$schema': $schema 'http://json-schema.org/draft-04/schema#' names no draft acpflow checks: leave it out for draft 2020-12, or name https://json-schema.org/draft/2020-12/schema or http://json-schema.org/draft-07/schema#"},
		{"nor 2019-09", `{"$schema": "https://json-schema.org/draft/2019-09/schema"}`, []string{"$schema"}, "names no draft acpflow checks"},
		{"nor a URI of no draft", `{"$schema": "https://example.com/my-meta"}`, []string{"$schema"}, "names no draft acpflow checks"},
		{"$schema is a string", `{"$schema": 7}`, []string{"$schema"}, "at '/$schema': got number, want string"},
		{"an unknown root draft is named before what is under it", `{"$defs": {"a": {"$id": "a.json", "$schema": "http://json-schema.org/draft-07/schema#"}}, "$schema": "https://json-schema.org/draft/2019-09/schema"}`,
			[]string{"$schema"}, "$schema 'https://json-schema.org/draft/2019-09/schema' names no draft acpflow checks"},
		{"a subschema of another draft", `{"properties": {"a": {"$id": "a.json", "$schema": "http://json-schema.org/draft-07/schema#"}}}`,
			[]string{"properties", "a", "$schema"}, "$schema names draft-07 here and draft 2020-12 at the root: a schema is checked by one draft"},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := compileInline(t, c.schema)
			assertFieldError(t, err, append([]string{"with", "output-schema"}, c.path...), c.msg)
		})
	}
}

func assertFieldError(t *testing.T, err error, path []string, msg string) {
	t.Helper()
	var fe *steps.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want a *steps.FieldError", err, err)
	}
	if !reflect.DeepEqual(fe.Path, path) || !strings.Contains(err.Error(), msg) {
		t.Errorf("error at %q: %v\nwant at %q, containing %q", fe.Path, err, path, msg)
	}
}

// TestASchemaThatIsNotOneIsRefusedAtTheKeywordAtFault covers every kind of
// keyword value the meta-schemas constrain (types, counts, numbers,
// regular expressions, schema lists and maps, names, anchors, ids) and
// references that lead nowhere in the document or out of it. The library
// would accept most of these, or refuse them without saying where.
func TestASchemaThatIsNotOneIsRefusedAtTheKeywordAtFault(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		path         []string
		msg          string
	}{
		{"an unknown type name", `{"properties": {"a": {"type": "bool"}}}`, []string{"properties", "a", "type"},
			"at '/properties/a/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'"},
		{"an unknown name in a type list", `{"type": ["string", "strin"]}`, []string{"type", "1"}, "value must be one of"},
		{"a type listed twice", `{"type": ["string", "string"]}`, []string{"type"}, "at '/type': items at 0 and 1 are equal"},
		{"an empty type list", `{"type": []}`, []string{"type"}, "want at least one type"},
		{"a type that is neither", `{"type": 3}`, []string{"type"}, "got number, want string or array"},
		{"required as a string", `{"required": "approved"}`, []string{"required"}, "at '/required': got string, want array"},
		{"required twice", `{"required": ["a", "a"]}`, []string{"required"}, "items at 0 and 1 are equal"},
		{"a required name that is not a string", `{"required": ["a", 1]}`, []string{"required", "1"}, "got number, want string"},
		{"a negative count", `{"minLength": -1}`, []string{"minLength"}, "got -1, want a whole number from 0 to 2147483647"},
		{"a fractional count", `{"maxItems": 1.5}`, []string{"maxItems"}, "got 1.5, want a whole number"},
		{"a count past int32", `{"maxLength": 4294967296}`, []string{"maxLength"}, "want a whole number from 0 to 2147483647"},
		{"a count as text", `{"minProperties": "2"}`, []string{"minProperties"}, `got '2', want a whole number`},
		{"a bound as text", `{"maximum": "3"}`, []string{"maximum"}, "got string, want number"},
		{"multipleOf zero", `{"multipleOf": 0}`, []string{"multipleOf"}, "got 0, want a number above 0"},
		{"a pattern that is no regular expression", `{"pattern": "("}`, []string{"pattern"}, "'(' is not a regular expression: error parsing regexp"},
		{"a patternProperties name that is none", `{"patternProperties": {"a(": {}}}`, []string{"patternProperties", "a("}, "'a(' is not a regular expression"},
		{"an empty allOf", `{"allOf": []}`, []string{"allOf"}, "got an empty array, want at least one schema"},
		{"an anyOf entry that is no schema", `{"anyOf": [{}, 1]}`, []string{"anyOf", "1"}, "got number, want object or boolean"},
		{"a property schema that is no schema", `{"properties": {"a": "string"}}`, []string{"properties", "a"}, "got string, want object or boolean"},
		{"properties as a list", `{"properties": [{"type": "string"}]}`, []string{"properties"}, "got array, want object"},
		{"items as a list under 2020-12", `{"items": [{"type": "string"}]}`, []string{"items"}, "under draft 2020-12 a list of item schemas is prefixItems"},
		{"uniqueItems as text", `{"uniqueItems": "yes"}`, []string{"uniqueItems"}, "got string, want boolean"},
		{"enum that is no list", `{"enum": "a"}`, []string{"enum"}, "got string, want array"},
		{"dependentRequired of no names", `{"dependentRequired": {"a": "b"}}`, []string{"dependentRequired", "a"}, "got string, want array"},
		{"an anchor that is no name", `{"$defs": {"x": {"$anchor": "1x"}}}`, []string{"$defs", "x", "$anchor"}, "'1x' is not an anchor name"},
		{"an anchor defined twice", `{"$defs": {"x": {"$anchor": "a"}, "y": {"$anchor": "a"}}}`, []string{"$defs", "y", "$anchor"}, "anchor 'a' is defined twice in #"},
		{"an $id with a fragment under 2020-12", `{"$defs": {"x": {"$id": "x.json#here"}}}`, []string{"$defs", "x", "$id"}, "has a fragment: name a schema with $anchor"},
		{"a $ref to a pointer that names no schema", `{"properties": {"a": {"$ref": "#/properties/b"}}}`, []string{"properties", "a", "$ref"},
			"at '/properties/a/$ref': $ref '#/properties/b': no schema at '/properties/b'"},
		{"a $ref into a keyword that holds no schema", `{"type": "object", "properties": {"a": {"$ref": "#/type"}}}`, []string{"properties", "a", "$ref"}, "no schema at '/type'"},
		{"a $ref to an anchor no schema has", `{"$ref": "#nope"}`, []string{"$ref"}, "$ref '#nope': no anchor 'nope' in #"},
		{"a $ref to a file", `{"properties": {"a": {"$ref": "defs.json#/x"}}}`, []string{"properties", "a", "$ref"},
			"with.output-schema is not a schema acpflow can use: at '/properties/a/$ref': $ref "},
		{"a $ref to a URL", `{"$ref": "https://example.com/s.json"}`, []string{"$ref"}, "$ref https://example.com/s.json: acpflow loads no other schema documents"},
		{"a $dynamicRef to another document", `{"$dynamicRef": "other.json#node"}`, []string{"$dynamicRef"}, "acpflow loads no other schema documents"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileInline(t, c.schema)
			assertFieldError(t, err, append([]string{"with", "output-schema"}, c.path...), c.msg)
		})
	}
	// A file's numbers are read as written: the library reads some no
	// YAML value would give.
	dir := t.TempDir()
	for _, c := range []struct{ name, schema, msg string }{
		{"a count the library reads as no int", `{"minItems": 1e3}`, "file.json is not a valid JSON Schema: at '/minItems': got 1e3, want a whole number from 0 to 2147483647"},
		{"a bound no float64 holds", `{"minimum": 1e400}`, "at '/minimum': 1e400 is out of range"},
		{"an enum value no float64 holds", `{"enum": [1, 1e999]}`, "at '/enum/1': 1e999 is out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "file.json"), []byte(c.schema), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Prepare(map[string]any{"output-schema": "file.json"}, dir, "the final message")
			assertFieldError(t, err, []string{"with", "output-schema"}, c.msg)
		})
	}
	// A $ref by an $id of this document is no other document.
	if _, err := compileInline(t, `{"$defs": {"tag": {"$id": "tag.json", "type": "string"}}, "items": {"$ref": "tag.json"}}`); err != nil {
		t.Errorf("a $ref to an $id in the document: %v", err)
	}
}

// TestARefCycleIsRefusedOnTheRefThatClosesIt covers $ref cycles that never
// move into the answer, whatever keyword closes them ($ref alone, $defs
// chains, allOf, anyOf, oneOf, not, if/then, dependentSchemas, $id and
// anchor references, $dynamicRef, draft-07 definitions), reached from the
// root directly or through a property. Such a schema applied itself to the
// same value without end, and failed every answer at run time.
func TestARefCycleIsRefusedOnTheRefThatClosesIt(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		path         []string
		chain        string
	}{
		{"the root refers to itself", `{"$ref": "#"}`, []string{"$ref"}, "# -$ref-> #"},
		{"two definitions refer to each other", `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`,
			[]string{"$defs", "a", "$ref"}, "#/$defs/a -$ref-> #/$defs/b -$ref-> #/$defs/a"},
		{"allOf refers to its schema", `{"type": "object", "allOf": [{"$ref": "#"}]}`, []string{"allOf", "0", "$ref"}, "# -allOf/0-> #/allOf/0 -$ref-> #"},
		{"an anyOf branch refers to its schema", `{"anyOf": [{"type": "string"}, {"$ref": "#"}]}`, []string{"anyOf", "1", "$ref"}, "# -anyOf/1-> #/anyOf/1 -$ref-> #"},
		{"a oneOf branch refers to its schema", `{"oneOf": [{"$ref": "#"}]}`, []string{"oneOf", "0", "$ref"}, "-oneOf/0->"},
		{"not refers to its schema", `{"not": {"$ref": "#"}}`, []string{"not", "$ref"}, "# -not-> #/not -$ref-> #"},
		{"if refers to its schema", `{"if": {"$ref": "#"}}`, []string{"if", "$ref"}, "# -if-> #/if -$ref-> #"},
		{"then refers to its schema", `{"if": {"type": "object"}, "then": {"$ref": "#"}}`, []string{"then", "$ref"}, "# -then-> #/then -$ref-> #"},
		{"a dependent schema refers to its schema", `{"dependentSchemas": {"a": {"$ref": "#"}}}`, []string{"dependentSchemas", "a", "$ref"}, "-dependentSchemas/a->"},
		{"a cycle met through a property", `{"properties": {"p": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"allOf": [{"$ref": "#/$defs/x"}]}}}`,
			[]string{"$defs", "x", "allOf", "0", "$ref"}, "#/$defs/x -allOf/0-> #/$defs/x/allOf/0 -$ref-> #/$defs/x"},
		{"a resource refers to itself by its $id", `{"properties": {"p": {"$ref": "a.json"}}, "$defs": {"a": {"$id": "a.json", "$ref": "a.json"}}}`,
			[]string{"$defs", "a", "$ref"}, "#/$defs/a -$ref-> #/$defs/a"},
		{"a schema refers to its own anchor", `{"$anchor": "top", "allOf": [{"$ref": "#top"}]}`, []string{"allOf", "0", "$ref"}, "# -allOf/0-> #/allOf/0 -$ref-> #"},
		{"a $dynamicRef finds its own schema", `{"$dynamicAnchor": "node", "$dynamicRef": "#node"}`, []string{"$dynamicRef"}, "# -$dynamicRef-> #"},
		{"draft-07 definitions refer to each other", `{"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}}`,
			[]string{"definitions", "a", "$ref"}, "#/definitions/a -$ref-> #/definitions/b -$ref-> #/definitions/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileInline(t, c.schema)
			assertFieldError(t, err, append([]string{"with", "output-schema"}, c.path...),
				"with.output-schema is not a schema acpflow can use: at '"+pointer(c.path)+"': $ref cycle ")
			if err != nil && !strings.Contains(err.Error(), c.chain) {
				t.Errorf("error %v\ndoes not name the cycle %q", err, c.chain)
			}
		})
	}
}

// TestARecursiveSchemaThatChecksPartsOfTheValueWorks covers schemas that
// come back to themselves through a part of the value (properties, items,
// additionalProperties, a $dynamicRef tree), a cycle that is never applied
// (then without if, $defs nothing refers to, a draft-07 $ref's ignored
// siblings), and that such a schema checks answers however deep.
func TestARecursiveSchemaThatChecksPartsOfTheValueWorks(t *testing.T) {
	tree := `{"type": "object", "required": ["value"], "properties": {"value": {"type": "number"}, "children": {"type": "array", "items": {"$ref": "#"}}}}`
	for _, c := range []struct{ name, schema, answer string }{
		{"a tree through items", tree, `{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}`},
		{"a list through a definition's property", `{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}}`, `{"next": {"next": {}}}`},
		{"a map of maps", `{"type": "object", "additionalProperties": {"$ref": "#"}}`, `{"a": {"b": {}}}`},
		{"then without if is never applied", `{"then": {"$ref": "#"}}`, `{}`},
		{"a cycle in $defs nothing refers to", `{"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`, `{}`},
		{"draft-07 ignores what is beside a $ref", `{"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/s", "allOf": [{"$ref": "#"}], "definitions": {"s": {"type": "object"}}}`, `{}`},
		{"a $dynamicRef tree", `{"$dynamicAnchor": "node", "type": "object", "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}}`, `{"kids": [{"kids": []}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := compileInline(t, c.schema)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if v, problems := o.Check(c.answer); problems != nil || v == nil {
				t.Errorf("the answer %s: %q", c.answer, problems)
			}
		})
	}
	o, err := compileInline(t, tree)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"value": 1, "children": [`, 500) + `{"value": "x"}` + strings.Repeat(`]}`, 500)
	_, problems := o.Check(deep)
	if want := "at '" + strings.Repeat("/children/0", 500) + "/value': got string, want number"; len(problems) != 1 || problems[0] != termtext.Cut(want, MaxProblemBytes) {
		t.Errorf("500 levels deep: %q", problems)
	}
}

// TestASchemaThatMultipliesItsWorkIsRefused covers schemas whose in-place
// keywords apply more schemas to one value than maxValueChecks: a chain of
// allOf, anyOf and oneOf pairs over $refs. The fault is on the first such
// schema met from the root.
func TestASchemaThatMultipliesItsWorkIsRefused(t *testing.T) {
	for _, keyword := range []string{"allOf", "anyOf", "oneOf"} {
		t.Run(keyword, func(t *testing.T) {
			defs := map[string]any{"d16": map[string]any{"type": "string"}}
			for i := 15; i >= 0; i-- {
				next := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
				defs[fmt.Sprintf("d%d", i)] = map[string]any{keyword: []any{next, next}}
			}
			_, err := Prepare(map[string]any{"output-schema": map[string]any{
				"properties": map[string]any{"p": map[string]any{"$ref": "#/$defs/d0"}}, "$defs": defs,
			}}, t.TempDir(), "the final message")
			assertFieldError(t, err, []string{"with", "output-schema", "properties", "p"},
				"with.output-schema is not a schema acpflow can use: at '/properties/p': checking one value here applies more than 10000 schemas")
		})
	}
}

// TestAnAnswerIsCheckedInBoundedWork covers answers whose check would
// multiply: a recursive schema that reaches itself twice per level (2^n
// applications for n levels), and nesting deeper than maxAnswerDepth. Both
// end with a problem, the library never asked.
func TestAnAnswerIsCheckedInBoundedWork(t *testing.T) {
	twice, err := compileInline(t, `{"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}], "$defs": {"a": {"properties": {"x": {"$ref": "#"}}}, "b": {"properties": {"x": {"$ref": "#"}}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := twice.Check(strings.Repeat(`{"x": `, 8) + `1` + strings.Repeat(`}`, 8)); problems != nil {
		t.Errorf("8 levels: %q", problems)
	}
	lists, err := compileInline(t, `{"items": {"$ref": "#"}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		o      *Schema
		answer string
	}{
		{"2^40 applications", twice, strings.Repeat(`{"x": `, 40) + `1` + strings.Repeat(`}`, 40)},
		{"nested past the depth", lists, strings.Repeat(`[`, maxAnswerDepth/2+1) + strings.Repeat(`]`, maxAnswerDepth/2+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, problems := c.o.Check(c.answer)
			if v != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "the answer is too large to check against the schema") {
				t.Errorf("check = %v, %q", v, problems)
			}
		})
	}
}

// TestEveryProblemOfAnAnswerIsNamedWhereItIs covers the keywords of each
// family (type, enum and const; numbers; strings; arrays; objects; the
// applicators allOf, anyOf, oneOf, not, if/then/else, dependentSchemas;
// unevaluated*; draft-07 items and dependencies): every problem is listed
// at its place in the answer, in the same order every time, and an answer
// that matches passes. The library decides; a walk that disagreed with it
// would show as "the answer does not match the schema: …".
func TestEveryProblemOfAnAnswerIsNamedWhereItIs(t *testing.T) {
	for _, c := range []struct {
		name, schema, bad string
		want              []string
		good              string
	}{
		{"type, enum and const", `{"properties": {"a": {"type": ["string", "null"]}, "b": {"enum": ["x", 2, null]}, "c": {"const": "k"}, "d": {"type": "integer"}}}`,
			`{"a": 1, "b": "y", "c": "j", "d": 1.5}`, []string{"at '/a': got number, want string or null", "at '/b': value must be one of 'x', 2, null", "at '/c': value must be 'k'", "at '/d': got number, want integer"},
			`{"a": null, "b": 2, "c": "k", "d": 3}`},
		{"enum and const of structured values", `{"properties": {"a": {"const": {"k": 1}}, "b": {"enum": [[1], {"k": 1}]}}}`,
			`{"a": {"k": 2}, "b": [2]}`, []string{"at '/a': value must be the value const gives", "at '/b': value must be one of the 2 values enum lists"},
			`{"a": {"k": 1}, "b": {"k": 1}}`},
		{"numbers", `{"items": {"minimum": 1, "maximum": 9, "exclusiveMaximum": 5, "multipleOf": 2}}`,
			`[0, 10, 3]`, []string{"at '/0': minimum: got 0, want 1", "at '/1': exclusiveMaximum: got 10, want 5", "at '/1': maximum: got 10, want 9", "at '/2': multipleOf: got 3, want 2"},
			`[2, 4]`},
		{"strings", `{"items": {"minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"}}`,
			`["a", "abcd", "A1"]`, []string{"at '/0': minLength: got 1, want 2", "at '/1': maxLength: got 4, want 3", "at '/2': 'A1' does not match pattern '^[a-z]+$'"},
			`["ab", "xyz"]`},
		{"arrays", `{"prefixItems": [{"type": "string"}], "items": false, "minItems": 2, "uniqueItems": true, "contains": {"type": "number"}}`,
			`["a", "a", "a"]`, []string{"at '': got 3 items, want at most 1", "at '': items at 0 and 1 are equal", "at '': no items match contains schema"},
			``},
		{"contains with bounds", `{"contains": {"type": "number"}, "minContains": 2, "maxContains": 3, "maxItems": 5}`,
			`[1, "a", "b", "c", "d", "e"]`, []string{"at '': maxItems: got 6, want 5", "at '': minContains: got 1 items that match contains, want 2"},
			`[1, 2, "a"]`},
		{"objects", `{"type": "object", "required": ["a", "b"], "properties": {"n": {"type": "number"}}, "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false, "propertyNames": {"maxLength": 4}, "minProperties": 2, "dependentRequired": {"n": ["m"]}}`,
			`{"n": 1, "x-abc": 2, "zz": 0}`, []string{"at '': additional properties 'zz' not allowed", "at '': invalid property name 'x-abc': maxLength: got 5, want 4", "at '': missing properties 'a', 'b'", "at '': properties 'm' required, if 'n' exists", "at '/x-abc': got number, want string"},
			``},
		{"a property that may not be", `{"properties": {"secret": false}}`, `{"secret": 1}`, []string{"at '/secret': no value is allowed here"}, `{"other": 1}`},
		{"allOf lists what each part says", `{"allOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}}]}`,
			`{"b": 1}`, []string{"at '': missing property 'a'", "at '/b': got number, want string"}, `{"a": 1, "b": "x"}`},
		{"anyOf lists every branch", `{"anyOf": [{"type": "string"}, {"type": "number"}]}`,
			`true`, []string{"at '': got boolean, want number", "at '': got boolean, want string"}, `"x"`},
		{"oneOf says which branches matched", `{"oneOf": [{"type": "number"}, {"minimum": 0}]}`,
			`3`, []string{"at '': 'oneOf' failed, subschemas 0, 1 matched"}, `-1`},
		{"not", `{"not": {"type": "null"}}`, `null`, []string{"at '': 'not' failed"}, `0`},
		{"if, then and else", `{"if": {"properties": {"kind": {"const": "n"}}}, "then": {"properties": {"v": {"type": "number"}}}, "else": {"properties": {"v": {"type": "string"}}}}`,
			`{"kind": "n", "v": "x"}`, []string{"at '/v': got string, want number"}, `{"kind": "s", "v": "x"}`},
		{"dependentSchemas", `{"dependentSchemas": {"card": {"required": ["cvc"]}}}`, `{"card": 1}`, []string{"at '': missing property 'cvc'"}, `{"cash": 1}`},
		{"unevaluatedProperties sees through allOf", `{"allOf": [{"properties": {"a": true}}], "unevaluatedProperties": false}`,
			`{"a": 1, "z": 2, "y": 3}`, []string{"at '': unevaluated properties 'y', 'z' not allowed"}, `{"a": 1}`},
		{"unevaluatedItems sees through prefixItems", `{"prefixItems": [true], "unevaluatedItems": {"type": "string"}}`,
			`[1, 2, "x", 3]`, []string{"at '/1': got number, want string", "at '/3': got number, want string"}, `[1, "x"]`},
		{"draft-07 items, additionalItems and dependencies", `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": {"type": "number"}, "dependencies": {"a": ["b"]}}`,
			`["x", "y", 1]`, []string{"at '/1': got string, want number"}, `["x", 1, 2]`},
		{"draft-07 dependencies on objects", `{"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}`,
			`{"a": 1, "c": 2}`, []string{"at '': missing property 'd'", "at '': properties 'b' required, if 'a' exists"}, `{"a": 1, "b": 2}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := compileInline(t, c.schema)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				v, problems := o.Check(c.bad)
				if v != nil || !reflect.DeepEqual(problems, c.want) {
					t.Fatalf("check(%s) = %v, %q\nwant problems %q", c.bad, v, problems, c.want)
				}
			}
			if c.good != "" {
				if v, problems := o.Check(c.good); v == nil || problems != nil {
					t.Errorf("check(%s) = %v, %q; want it to match", c.good, v, problems)
				}
			}
		})
	}
}
