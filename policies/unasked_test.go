package policies

import (
	"maps"
	"strings"
	"testing"
)

// unasked: and ask-fallback: are each written once per policy, in the
// permission's mapping or beside it, in either order: the class is "a
// setting given twice, whatever other setting lies between the two".
func TestAPermissionSettingGivenTwiceIsAnErrorInEitherOrder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spec    map[string]any
		beside  map[string]any
		wantErr string
	}{
		{"unasked inside, ask-fallback inside, unasked beside", map[string]any{"default": "ask", "unasked": "record", "ask-fallback": "allow"},
			map[string]any{"unasked": "fail"}, "unasked: unasked is set twice"},
		{"both inside, ask-fallback beside", map[string]any{"default": "ask", "unasked": "record", "ask-fallback": "allow"},
			map[string]any{"ask-fallback": "reject"}, "ask-fallback: ask-fallback is set twice"},
		{"unasked inside, ask-fallback beside", map[string]any{"default": "ask", "unasked": "record"},
			map[string]any{"ask-fallback": "reject"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			block := map[string]any{"permission": tt.spec}
			maps.Copy(block, tt.beside)
			b, err := ParseBlock(block, t.TempDir())
			got := b.Permission
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && UnaskedOf(got) != UnaskedRecord:
				t.Errorf("UnaskedOf = %s, want the record written inside", UnaskedOf(got))
			}
		})
	}
	if UnaskedOf(&AskFallback{Permission: Shorthand{Decision: Allow}, Fallback: Reject}) != UnaskedRecord {
		t.Error("allow under an ask-fallback should default to record")
	}
	if UnaskedOf(Shorthand{Decision: Reject}) != UnaskedFail || AllowsAll(&WithUnasked{Permission: Shorthand{Decision: Reject}, Unasked: UnaskedRecord}) {
		t.Error("reject defaults to fail and never allows all")
	}
}
