package workflows_test

import (
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// TestFieldErrorsArePlacedByTheirPath: a kind's and an agent's errors are
// steps.FieldErrors, placed on the value their path leads to, never by
// reading their message.
func TestFieldErrorsArePlacedByTheirPath(t *testing.T) {
	for _, tc := range []struct {
		name, agent, step, with string
		at                      string // FILE:LINE:COL of the caret
	}{
		{"a builtin beside a preset's command is at preset:", "builtin: demo\n    preset: codex", "demo", "", "t.yaml:6:13:"},
		{"a builtin beside a command is at command:", "builtin: demo\n    command: x", "demo", "", "t.yaml:6:14:"},
		{"an agent without a command is at its name", "cwd: w", "demo", "", "t.yaml:4:3:"},
		{"a grace of zero is at its value", "builtin: demo\n    dispose: {eof-grace: 0s}", "demo", "", "t.yaml:6:26:"},
		{"a step's config value is at the value, under an option id with a dot", "builtin: demo", "demo", `config: {"a.b": 3}`, "t.yaml:12:23:"},
		{"a step's unknown agent is at the name", "builtin: demo", "nope", "", "t.yaml:10:14:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := "      agent: " + tc.step + "\n      prompt: hi\n"
			if tc.with != "" {
				with += "      " + tc.with + "\n"
			}
			src := "name: t\n" +
				"agents:\n" +
				"  # the agent\n" +
				"  demo:\n" +
				"    " + tc.agent + "\n" +
				"steps:\n  - id: a\n    uses: acp-subagent\n    with:\n" + with
			_, err := workflows.Parse("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if !strings.HasPrefix(err.Error(), tc.at) {
				t.Errorf("error is not at %s:\n%s\n--- file\n%s", tc.at, err, src)
			}
		})
	}
}
