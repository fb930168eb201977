package acpsubagent

import (
	"errors"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

func TestEmptyEnvNamesTheTemplateAndWhyNeverAValue(t *testing.T) {
	ambient := map[string]string{"SET": "s3cret", "EMPTY": ""}
	// render stands for the engine's: an unset variable renders "".
	render := func(tmpl string) (string, error) {
		switch {
		case strings.Contains(tmpl, "env.SET"):
			return "s3cret", nil
		case strings.Contains(tmpl, "env.EMPTY"):
			return "", nil
		case strings.Contains(tmpl, "inputs.env"):
			return "", nil
		}
		return "", nil
	}
	for _, tc := range []struct{ raw, want string }{
		{"${{ env.UNSET }}", `f: ${{ env.UNSET }} rendered empty (UNSET is not set in acpflow's environment)`},
		{"Bearer ${{ env.EMPTY }}", `f: ${{ env.EMPTY }} rendered empty (EMPTY is empty in acpflow's environment)`},
		{`${{ env["UNSET"] }}`, `f: ${{ env["UNSET"] }} rendered empty (UNSET is not set in acpflow's environment)`},
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
	// No words known, but no key reached it (an empty one rendered is none).
	got = likelyCause(claude, errors.New("agent claude did not start within 1s (start-timeout): no answer to session/new"), "", map[string]string{"ANTHROPIC_API_KEY": "", "IS_SANDBOX": "1", "HOME": t.TempDir()}, []string{"ANTHROPIC_API_KEY"}, nil)
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

func TestAuthRequiredGetsAHintInTheTermsOfWhatTheUserWrote(t *testing.T) {
	noKey := map[string]string{"IS_SANDBOX": "1", "HOME": t.TempDir()}
	authErr := errors.New("agent x: session/prompt failed: Authentication required (code -32000)")
	for _, tc := range []struct {
		name  string
		agent steps.Agent
		want  []string
		not   []string
	}{
		{"a claude agent in a workflow", steps.Agent{Name: "c", Preset: "claude"},
			[]string{"it has no credentials: set ANTHROPIC_API_KEY and pass it in the agent's env: (ANTHROPIC_API_KEY: ${{ env.ANTHROPIC_API_KEY }})", "claude /login"}, []string{"export"}},
		{"claude from acpflow prompt", steps.Agent{Name: "c", Preset: "claude", ShellAdvice: true},
			[]string{"it has no credentials: export ANTHROPIC_API_KEY=…", "claude /login"}, []string{"env:", "${{"}},
		{"codex from acpflow prompt", steps.Agent{Name: "c", Preset: "codex", ShellAdvice: true},
			[]string{"export CODEX_API_KEY=… and add --auth api-key"}, []string{"env:", "${{"}},
		{"gemini in a workflow", steps.Agent{Name: "c", Preset: "gemini"},
			[]string{"set auth: gemini-api-key, set GEMINI_API_KEY and pass it in the agent's env:"}, nil},
		{"qwen, whose causes do not say", steps.Agent{Name: "c", Preset: "qwen"},
			[]string{"OPENAI_API_KEY"}, nil},
		{"an agent of no preset", steps.Agent{Name: "mine"},
			[]string{"set auth: to one of its methods (acpflow probe lists them)"}, []string{"export"}},
		{"an agent of no preset from acpflow prompt", steps.Agent{Name: "mine", ShellAdvice: true},
			[]string{"add --auth METHOD", "--env NAME"}, []string{"env:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := likelyCause(&tc.agent, authErr, "", noKey, nil, nil)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q has %q", got, n)
				}
			}
		})
	}
}
