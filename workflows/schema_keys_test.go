package workflows

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent"
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
	if err := json.Unmarshal(Schema, &s); err != nil {
		t.Fatal(err)
	}
	def := func(name string) []string {
		return sortedKeys(s.Definitions[name].Properties)
	}
	var presets []string
	for _, p := range steps.Presets() {
		presets = append(presets, p.Name)
	}
	kind, _ := steps.Lookup(acpsubagent.Name)
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
		{"agent keys", def("agent"), agentKeys},
		{"dispose keys", sortedKeys(s.Definitions["agent"].Properties["dispose"].Properties), disposeKeys},
		{"agent presets", s.Definitions["agent"].Properties["preset"].Enum, presets},
		{"step keys", def("step"), stepKeys},
		{"step kinds", s.Definitions["step"].Properties["uses"].Enum, steps.Names()},
		{"acp-subagent with keys", def("acp-subagent"), kind.Keys()},
		{"acp-subagent required keys", s.Definitions["acp-subagent"].Required, kind.Required()},
		{"policies keys", def("policies"), policyKeys},
		{"permission keys", sortedKeys(permission), policies.PermissionSpecKeys},
		{"env keys", def("env"), policies.EnvSpecKeys},
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
