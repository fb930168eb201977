package workflows_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/acpflow/acpflow/workflows"
)

// compileSchema compiles workflows.Schema (with every kind registered in
// the test binary): the keywords the library knows must hold values of
// their JSON types, every $ref must resolve in the document, and every
// pattern must compile. (The library checks no schema against its
// meta-schema; the examples and broken files below test what it says.)
func compileSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	schema, err := workflows.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("schema.json is not a JSON Schema: %v", err)
	}
	if s.Schema != "http://json-schema.org/draft-07/schema#" {
		t.Fatalf("schema.json says $schema %q, want draft-07's", s.Schema)
	}
	rs, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: "file:///schema.json"})
	if err != nil {
		t.Fatalf("schema.json does not compile: %v", err)
	}
	return rs
}

// yamlAsJSON reads a YAML file as the JSON value an editor validates.
func yamlAsJSON(t *testing.T, file string) any {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(src)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

func TestEveryExampleMatchesTheSchema(t *testing.T) {
	s := compileSchema(t)
	for _, file := range exampleFiles(t) {
		t.Run(filepath.Base(file)+" matches the schema", func(t *testing.T) {
			if err := s.Validate(yamlAsJSON(t, file)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestEveryExampleNamesTheSchema(t *testing.T) {
	for _, file := range exampleFiles(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		schema, _ := filepath.Rel(filepath.Dir(file), "schema.json") // ../schema.json, ../../ in examples/cookbook
		if want := "# yaml-language-server: $schema=" + filepath.ToSlash(schema) + "\n"; !strings.HasPrefix(string(src), want) {
			t.Errorf("%s does not start with the yaml-language-server schema comment %q", file, want)
		}
	}
}

// TestTheSchemaRejectsWhatItCanSee: the broken files whose fault is one of
// shape (a key, a type, a value out of range) fail the schema too, so that
// an editor shows the mistake before validate does. The others (references,
// cycles, expressions, agents a step names) are beyond a schema.
func TestTheSchemaRejectsWhatItCanSee(t *testing.T) {
	s := compileSchema(t)
	beyondSchema := map[string]bool{
		"agent-env-template": true, "cycle-of-three": true, "descendant-ref": true,
		"duplicate-key": true, "empty-file": true, "for-each-uses-item": true, "if-does-not-compile": true,
		"item-outside-for-each": true, "needs-unknown-step": true, "non-ancestor-ref": true,
		"self-cycle": true, "syntax-error": true, "tab-indent": true, "template-syntax-error": true,
		"template-type-error": true, "template-unclosed": true, "unknown-agent": true,
		"unknown-alias": true, "unknown-input-ref": true, "unknown-step-field": true,
		"unknown-step-ref": true, "env-rule-bad": true, "duplicate-id": true,
		"unknown-scope-name": true, "mode-template": true, "with-mode-template": true,
		"if-json-wrong-type": true, "output-schema-missing-file": true,
		"output-schema-not-a-schema": true, // a schema inside a schema is a value of any shape
		"output-schema-ref-cycle":    true,
		"max-output-too-large":       true, // a pattern cannot compare 2 GiB with 1 GiB
		// YAML that does not parse, and expressions (wording.go).
		"tab-in-block-scalar": true, "indented-deeper-than-key": true, "indented-less-than-with": true,
		"indented-between-keys": true, "mapping-on-key-line": true,
		"colon-in-unquoted-prompt": true, "colon-in-prompt-continuation": true,
		"colon-in-run-command": true, "colon-in-run-shorthand": true, "colon-in-run-continuation": true,
		"colon-in-prompt-text": true, "colon-in-output-value": true, "github-actions-functions": true,
		"comment-cuts-if": true, "comment-cuts-rule": true, "equals-for-compare": true,
	}
	for _, file := range invalidFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		if beyondSchema[name] {
			continue
		}
		t.Run(name+" fails the schema", func(t *testing.T) {
			if err := s.Validate(yamlAsJSON(t, file)); err == nil {
				t.Error("the schema accepts it")
			}
		})
	}
}
