package policies

import (
	"strings"
	"testing"
)

// TestParseBlockReadsTheWholePoliciesBlock: the settings beside
// permission: wrap it, a setting with no permission is refused, every
// mistake's path starts with its key, and a key the caller found broken
// counts as written but is not parsed again.
func TestParseBlockReadsTheWholePoliciesBlock(t *testing.T) {
	b, err := ParseBlock(map[string]any{"permission": "ask", "ask-fallback": "allow", "env": map[string]any{"inherit": "core"}}, "/wf")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Permission.DecidePermission(t.Context(), &PermissionRequest{}); v.Decision != Ask || v.Fallback != Allow {
		t.Errorf("verdict %+v; want ask, falling back to allow", v)
	}
	if b.Env == nil {
		t.Error("env: not parsed")
	}
	for _, tt := range []struct {
		name   string
		block  map[string]any
		broken []string
		want   string
	}{
		{"a setting without permission", map[string]any{"unasked": "fail"}, nil, "unasked: unasked goes with the permission: it applies to, in the same policies: block"},
		{"a rule's mistake", map[string]any{"permission": map[string]any{"rules": []any{map[string]any{"if": "true", "then": "alow"}}}}, nil, `permission.rules[0].then: want one of`},
		{"an env mistake", map[string]any{"env": map[string]any{"inherit": "some"}}, nil, `env.inherit: want one of all, core, none`},
		{"a broken permission is written", map[string]any{"permission": nil, "ask-fallback": "allow"}, []string{"permission"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBlock(tt.block, "/wf", tt.broken...)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error = %v; want none", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("error = %v; want %q", err, tt.want)
			}
		})
	}
}
