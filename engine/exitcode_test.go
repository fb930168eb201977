package engine_test

import (
	"testing"

	"github.com/acpflow/acpflow/engine"
)

// TestAForEachStepsExitCodeIsItsFirstFailure: a for-each shell step's
// exit_code is the first element's non-zero one (the element its error
// names), 0 when every element exited 0, and absent when no element ran
// a command.
func TestAForEachStepsExitCodeIsItsFirstFailure(t *testing.T) {
	code := func(n int) *int { return &n }
	element := func(c *int) *engine.StepResult {
		st := engine.StatusSucceeded
		if c != nil && *c != 0 {
			st = engine.StatusFailed
		}
		return &engine.StepResult{Status: st, Output: "", ExitCode: c}
	}
	for _, tc := range []struct {
		name string
		each []*int
		want string
	}{
		{"every element exited 0", []*int{code(0), code(0)}, "0"},
		{"the first non-zero", []*int{code(0), code(2), code(3)}, "2"},
		{"a stopped element has none", []*int{nil, code(0)}, "0"},
		{"no command ran", []*int{nil, nil}, "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var each []*engine.StepResult
			for _, c := range tc.each {
				each = append(each, element(c))
			}
			got := (&engine.Step{}).Combine(each).ExitCode
			s := "absent"
			if got != nil {
				s = string(rune('0' + *got))
			}
			if s != tc.want {
				t.Errorf("exit_code %s, want %s", s, tc.want)
			}
		})
	}
}
