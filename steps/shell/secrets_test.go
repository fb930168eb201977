package shell_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

// TestAShellStepScrubsTheSecretsItWasGiven covers each class of secret an
// agent step scrubs (a value a ${{ }} produced in env:, a literal value
// of a credential's name in env:, a credential of acpflow's environment,
// a ${{ }} of run: that reads env) printed by the command to stdout, to
// stderr and in a failure: none reaches the output, the stderr, the
// error or an event, and each is "[redacted]" where it was.
func TestAShellStepScrubsTheSecretsItWasGiven(t *testing.T) {
	const (
		templated = "tok-templated-4821"
		literal   = "key-literal-4821"
		ambient   = "ghp-ambient-4821"
	)
	ambientEnv := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "GITHUB_TOKEN": ambient}
	for _, tc := range []struct {
		name, secret, run string
		env               map[string]any
	}{
		{"a ${{ }} in env:", templated, `echo "T=$T"; echo "T=$T" >&2; exit 3`, map[string]any{"T": "${{ env.DEPLOY_TOKEN }}"}},
		{"a credential's name in env:", literal, `echo "K=$API_KEY"; echo "K=$API_KEY" >&2; exit 3`, map[string]any{"API_KEY": literal}},
		{"a credential of acpflow's environment", ambient, `echo "G=` + ambient + `"; echo "G=` + ambient + `" >&2; exit 3`, nil},
		{"a ${{ env.X }} in run:", templated, `echo "R=${{ env.DEPLOY_TOKEN }}"; echo "R=${{ env.DEPLOY_TOKEN }}" >&2; exit 3`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := map[string]any{"run": tc.run}
			if tc.env != nil {
				with["env"] = tc.env
			}
			a := runEdited(t, context.Background(), with, ambientEnv, nil, func(inv *steps.Invocation) {
				renderAs(templated)(inv)
				// The engine hands the step its with: rendered.
				if tc.env != nil {
					rendered := map[string]any{}
					for k, v := range tc.env {
						rendered[k] = strings.ReplaceAll(v.(string), "${{ env.DEPLOY_TOKEN }}", templated)
					}
					inv.With = map[string]any{"run": tc.run, "env": rendered}
				}
			})
			if a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "exited with code 3") {
				t.Fatalf("error %v; want the exit code", a.res.Err)
			}
			events, _ := json.Marshal(a.events.all)
			for where, text := range map[string]string{
				"the output": a.res.Output, "the stderr": a.res.Stderr, "the error": a.res.Err.Error(), "the events": string(events),
			} {
				if strings.Contains(text, tc.secret) {
					t.Errorf("%s holds the secret: %s", where, text)
				}
				if !strings.Contains(text, "[redacted]") {
					t.Errorf("%s does not show where the secret was: %s", where, text)
				}
			}
		})
	}
}

// TestASecretSplitAcrossReadsIsScrubbedFromTheStdoutEvents covers a
// secret the command writes in pieces, between which acpflow reads what
// came (class: split at each point, with output before and after): the
// stdout events, which are recorded as they come, never hold it.
func TestASecretSplitAcrossReadsIsScrubbedFromTheStdoutEvents(t *testing.T) {
	const secret = "key-split-48215"
	for _, cut := range []int{1, 7, len(secret) - 1} {
		line := `printf 'before %s' "${API_KEY%` + secret[cut:] + `}"; sleep 0.05; printf '%s after' "${API_KEY#` + secret[:cut] + `}"`
		a := runEdited(t, context.Background(), map[string]any{"run": line, "env": map[string]any{"API_KEY": secret}}, nil, nil, nil)
		if a.res.Err != nil || a.res.Output != "before [redacted] after" {
			t.Fatalf("cut at %d: output %q, error %v", cut, a.res.Output, a.res.Err)
		}
		var text strings.Builder
		for _, ev := range a.events.all {
			if b, _ := json.Marshal(ev); strings.Contains(string(b), `"stdout"`) {
				text.Write(b)
			}
		}
		if strings.Contains(text.String(), secret[:cut]+secret[cut:]) || strings.Contains(text.String(), secret[:max(cut, 6)]) {
			t.Errorf("cut at %d: the stdout events hold (part of) the secret: %s", cut, text.String())
		}
	}
}
