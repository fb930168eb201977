package workflows_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/workflows"
)

// aliasBomb is the "billion laughs" file: each level repeats the one below
// ten times, so nine levels expand to a billion strings.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("name: t\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("steps: *l9\n")
	return b.String()
}

func TestHostileFilesFailFast(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"an alias bomb is refused before it is expanded", aliasBomb(), "expands to more than"},
		{"deep nesting is an error, not a crash", "name: t\nsteps: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", ""},
		{"a merge key of a scalar is refused", "name: t\nx: &x 1\nsteps:\n  - <<: *x\n", "merge key"},
		{"a second YAML document is refused", "name: t\nsteps: []\n---\nname: u\n", "one YAML document"},
		{"a mapping key that is a mapping is refused", "name: t\n? {a: 1}\n: 2\nsteps: []\n", ""},
		{"a lone carriage return counts as a line break", "name: t\rsteps: []\r", "2:8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := workflows.Parse("h.yaml", []byte(tc.src))
			// A hang guard, not a measurement (milliseconds idle): an
			// expanded bomb takes minutes, a loaded machine seconds.
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("Parse took %v", d)
			}
			var es workflows.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error = %v, want workflows.Errors", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}
