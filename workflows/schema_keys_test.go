package workflows

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// TestTheSchemaKnowsTheKeysTheLoaderKnows keeps schema.json and the
// decoder's key lists from drifting apart: a key added to one and not the
// other would make the editor and validate disagree.
func TestTheSchemaKnowsTheKeysTheLoaderKnows(t *testing.T) {
	var s struct {
		Properties  map[string]json.RawMessage `json:"properties"`
		Definitions map[string]struct {
			Properties map[string]struct {
				Enum       []string                   `json:"enum"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"properties"`
			Required []string `json:"required"`
			OneOf    []struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"oneOf"`
		} `json:"definitions"`
	}
	schema, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	def := func(name string) []string {
		return sortedKeys(s.Definitions[name].Properties)
	}
	var presets []string
	for _, p := range acpagent.Presets() {
		presets = append(presets, p.Name)
	}
	permission := map[string]bool{}
	for _, form := range s.Definitions["permission"].OneOf {
		for k := range form.Properties {
			permission[k] = true
		}
	}
	for _, tc := range []struct {
		name         string
		schema, code []string
	}{
		{"top-level keys", sortedKeys(s.Properties), workflowKeys},
		{"input keys", def("input"), inputKeys},
		{"input types", s.Definitions["input"].Properties["type"].Enum, inputTypes},
		{"agent keys", def("agent"), acpagent.AgentKeys},
		{"dispose keys", sortedKeys(s.Definitions["agent"].Properties["dispose"].Properties), acpagent.DisposeKeys},
		{"agent presets", s.Definitions["agent"].Properties["preset"].Enum, presets},
		{"step keys", def("step"), stepKeys},
		{"MCP server keys", def("mcp-server"), acpagent.MCPServerKeys},
		{"MCP server types", s.Definitions["mcp-server"].Properties["type"].Enum, []string{acpagent.MCPStdio, acpagent.MCPHTTP, acpagent.MCPSSE}},
		{"step kinds", s.Definitions["step"].Properties["uses"].Enum, steps.Names()},
		{"policies keys", def("policies"), policyKeys},
		{"permission keys", sortedKeys(permission), policies.PermissionSpecKeys()},
		{"env keys", def("env"), policies.EnvSpecKeys()},
		{"env inherit values", s.Definitions["env"].Properties["inherit"].Enum, []string{policies.InheritAll, policies.InheritCore, policies.InheritNone}},
	} {
		t.Run("the schema and the loader agree on the "+tc.name, func(t *testing.T) {
			a, b := slices.Sorted(slices.Values(tc.schema)), slices.Sorted(slices.Values(tc.code))
			if !slices.Equal(a, b) {
				t.Errorf("schema has %v, loader has %v", a, b)
			}
		})
	}
}

// TestEveryKindsSchemaKnowsItsKeys: the with: schema a kind supplies and the
// keys it declares to the loader are the same, for every kind registered
// (the test binary's own included).
func TestEveryKindsSchemaKnowsItsKeys(t *testing.T) {
	for _, name := range steps.Names() {
		kind, _ := steps.Lookup(name)
		var with struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(kind.Schema(), &with); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tc := range []struct {
			what         string
			schema, code []string
		}{
			{"with keys", sortedKeys(with.Properties), kind.Keys()},
			{"required keys", with.Required, kind.Required()},
		} {
			t.Run(name+"'s schema and Kind agree on the "+tc.what, func(t *testing.T) {
				a, b := slices.Sorted(slices.Values(tc.schema)), slices.Sorted(slices.Values(tc.code))
				if !slices.Equal(a, b) {
					t.Errorf("schema has %v, Kind has %v", a, b)
				}
			})
		}
	}
}
