package standard_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/policies"
	_ "github.com/acpflow/acpflow/standard"
	"github.com/acpflow/acpflow/steps"
)

// TestAProgramThatImportsStandardHasEveryKindAndForm covers what a binary
// gets from this one import: each step kind by its `uses:` name, and each
// policy form by its key (a form that is linked fails on the missing
// module, not on an unknown key).
func TestAProgramThatImportsStandardHasEveryKindAndForm(t *testing.T) {
	for _, kind := range []string{"acp-subagent", "shell"} {
		if _, ok := steps.Lookup(kind); !ok {
			t.Errorf("step kind %q is not registered; registered: %v", kind, steps.Names())
		}
	}
	var forms []string
	for _, f := range policies.Forms() {
		forms = append(forms, f.Key)
	}
	if !slices.Equal(forms, []string{"wasm"}) {
		t.Errorf("policy forms = %v; want wasm", forms)
	}
	for _, form := range forms {
		spec := map[string]any{form: "missing.policy"}
		_, err := policies.ParsePermission(spec, t.TempDir())
		if err == nil || strings.Contains(err.Error(), "unknown key") {
			t.Errorf("policy form %q: ParsePermission error = %v; want the form linked (an error about the missing module)", form, err)
		}
	}
}
