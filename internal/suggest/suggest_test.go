package suggest

import (
	"fmt"
	"testing"
)

func TestClosest(t *testing.T) {
	keys := []string{"rules", "default", "wasm", "config", "limits", "scrub-credentials"}
	for _, tt := range []struct{ name, word, want string }{
		{"a missing letter is found", "rule", "rules"},
		{"swapped letters are one edit", "defualt", "default"},
		{"case does not matter", "WASM", "wasm"},
		{"an underscore is a dash", "scrub_credentials", "scrub-credentials"},
		{"a different word gets nothing", "policy", ""},
		{"a short word needs a close match", "ru", ""},
		{"an empty word gets nothing", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Closest(tt.word, keys); got != tt.want {
				t.Errorf("Closest(%q) = %q; want %q", tt.word, got, tt.want)
			}
		})
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"kidn", "kind", 1}, {"allow", "alow", 1}, {"café", "cafe", 1},
	} {
		t.Run(fmt.Sprintf("%q to %q is %d", tt.a, tt.b, tt.want), func(t *testing.T) {
			if got, rev := Distance(tt.a, tt.b), Distance(tt.b, tt.a); got != tt.want || rev != tt.want {
				t.Errorf("Distance = %d, reversed %d", got, rev)
			}
		})
	}
}

func TestUnknownNamesTheFixAndTheList(t *testing.T) {
	known := []string{"running", "succeeded", "failed", "cancelled"}
	if got, want := Unknown("status", "faild", known), `unknown status "faild"; did you mean "failed"? (one of: running, succeeded, failed, cancelled)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := Unknown("status", "zzz", known), `unknown status "zzz" (one of: running, succeeded, failed, cancelled)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
