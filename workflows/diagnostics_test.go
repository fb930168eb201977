package workflows

import (
	"os"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
)

func TestStepTimeoutDefaults(t *testing.T) {
	for _, tc := range []struct {
		timeout string // "" writes no timeout:
		want    string // the step's timeout, or the error
	}{
		{"", engine.DefaultStepTimeout.String()},
		{"timeout: 90s", "1m30s"},
		{"timeout: 0", "0s"},
		{`timeout: "0s"`, "0s"},
		{"timeout: -1s", "want a duration greater than 0"},
	} {
		src := `name: t
agents:
  a: {builtin: demo}
steps:
  - id: s
    uses: acp-subagent
    ` + tc.timeout + `
    with: {agent: a, prompt: hi}
`
		wf, err := Parse("t.yaml", []byte(src))
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want %q", tc.timeout, err, tc.want)
			}
		case wf.Steps[0].Timeout.String() != tc.want:
			t.Errorf("%q: timeout %s, want %s", tc.timeout, wf.Steps[0].Timeout, tc.want)
		}
	}
}

func TestLoadWarningsJudgesTheStepsEnvPolicyAndOwnEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := dir + "/wf.yaml"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := Environment{Ambient: map[string]string{"HOME": dir, "CODEX_API_KEY": "k"}}
	// codex with its key passed in a step's with.env: met.
	p := write(`name: t
agents:
  codex: {preset: codex, auth: api-key}
steps:
  - {id: s, uses: acp-subagent, with: {agent: codex, prompt: hi, env: {CODEX_API_KEY: "${{ env.CODEX_API_KEY }}"}}}
`)
	if _, w, err := LoadWarnings(p, env); err != nil || len(w) != 0 {
		t.Errorf("passed in with.env: %v %v", w, err)
	}
	// Under another auth method (a login), no key is needed.
	p = write(`name: t
agents:
  gemini: {preset: gemini, auth: oauth-personal}
steps:
  - {id: s, uses: acp-subagent, with: {agent: gemini, prompt: hi}}
`)
	if _, w, err := LoadWarnings(p, env); err != nil || len(w) != 0 {
		t.Errorf("oauth-personal: %v %v", w, err)
	}
	// Neither key of codex reaches it: both are named.
	p = write(`name: t
agents:
  codex: {preset: codex}
steps:
  - {id: s, uses: acp-subagent, with: {agent: codex, prompt: hi}}
`)
	_, w, err := LoadWarnings(p, Environment{Ambient: map[string]string{"HOME": dir}})
	if err != nil || len(w) != 1 || !strings.Contains(w[0].Error(), `warning: agent "codex" (preset codex) needs CODEX_API_KEY or OPENAI_API_KEY (with auth: api-key)`) {
		t.Errorf("codex without a key: %v %v", w, err)
	}
}
