package acpsubagent

import (
	"errors"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

func TestEmptyEnvNamesTheTemplateAndWhyNeverAValue(t *testing.T) {
	ambient := map[string]string{"SET": "s3cret", "EMPTY": ""}
	// render stands for the engine's: an unset variable renders "null".
	render := func(tmpl string) (string, error) {
		switch {
		case strings.Contains(tmpl, "env.SET"):
			return "s3cret", nil
		case strings.Contains(tmpl, "env.EMPTY"):
			return "", nil
		case strings.Contains(tmpl, "inputs.env"):
			return "", nil
		}
		return "null", nil
	}
	for _, tc := range []struct{ raw, want string }{
		{"${{ env.UNSET }}", `f: ${{ env.UNSET }} rendered as "null" (UNSET is not set in acpflow's environment)`},
		{"Bearer ${{ env.EMPTY }}", `f: ${{ env.EMPTY }} rendered empty (EMPTY is empty in acpflow's environment)`},
		{`${{ env["UNSET"] }}`, `f: ${{ env["UNSET"] }} rendered as "null" (UNSET is not set in acpflow's environment)`},
		{"${{ env.SET }}", ""},
		{"${{ inputs.env }}", ""},
		{"literal", ""},
	} {
		got := strings.Join(emptyEnv("f", tc.raw, ambient, render), "\n")
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.raw, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("%s: a value in %q", tc.raw, got)
		}
	}
}

func TestLikelyCauseComesFromThePresetsTable(t *testing.T) {
	claude := &steps.Agent{Name: "claude", Preset: "claude"}
	withKey := map[string]string{"ANTHROPIC_API_KEY": "k", "IS_SANDBOX": "1"}
	// The adapter's words in the stderr tail.
	got := likelyCause(claude, errors.New("agent claude exited (exit status 1) during session/new"), "Error: Query closed before response received", withKey, nil, nil)
	if !strings.HasPrefix(got, "the agent ended during session/new; it likely has no credentials: set ANTHROPIC_API_KEY") {
		t.Errorf("query closed: %q", got)
	}
	// No words known, but no key reached it (a "null" rendered is none).
	got = likelyCause(claude, errors.New("agent claude did not start within 1s (start-timeout): no answer to session/new"), "", map[string]string{"ANTHROPIC_API_KEY": "null", "IS_SANDBOX": "1", "HOME": t.TempDir()}, []string{"ANTHROPIC_API_KEY"}, nil)
	if !strings.Contains(got, "it likely has no credentials: ANTHROPIC_API_KEY did not reach it") {
		t.Errorf("no key: %q", got)
	}
	// Nothing known: nothing said.
	if got := likelyCause(claude, errors.New("x"), "", withKey, nil, nil); got != "" {
		t.Errorf("nothing known: %q", got)
	}
	if got := likelyCause(&steps.Agent{Name: "mine"}, errors.New("Query closed before response received"), "", nil, nil, nil); got != "" {
		t.Errorf("no preset: %q", got)
	}
}
