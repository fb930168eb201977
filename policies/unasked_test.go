package policies

import (
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
		beside  func(Permission) (Permission, error)
		wantErr string
	}{
		{"unasked inside, ask-fallback inside, unasked beside", map[string]any{"default": "ask", "unasked": "record", "ask-fallback": "allow"},
			func(p Permission) (Permission, error) { return WithUnaskedSetting(p, "fail") }, "unasked is set twice"},
		{"both inside, ask-fallback beside", map[string]any{"default": "ask", "unasked": "record", "ask-fallback": "allow"},
			func(p Permission) (Permission, error) { return WithAskFallback(p, "reject") }, "ask-fallback is set twice"},
		{"unasked inside, ask-fallback beside", map[string]any{"default": "ask", "unasked": "record"},
			func(p Permission) (Permission, error) { return WithAskFallback(p, "reject") }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			perm, err := ParsePermission(tt.spec, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.beside(perm)
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
