package acpagent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEveryPresetSaysHowToInstallItsProgramAsItsDocsDo(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "agents", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Presets() {
		if p.Bin == "" || p.Install == "" {
			t.Errorf("preset %s: no Bin or Install", p.Name)
			continue
		}
		if strings.HasPrefix(p.Install, "npm ") && !strings.Contains(string(doc), "`"+p.Install+"`") {
			t.Errorf("docs/agents/README.md does not give %s's install command %q", p.Name, p.Install)
		}
	}
}

func TestAKeyIsMissingUnlessSetLoggedInOrAnotherAuth(t *testing.T) {
	claude, _ := LookupPreset("claude")
	codex, _ := LookupPreset("codex")
	home := t.TempDir()
	if !claude.KeyMissing("", map[string]string{"HOME": home}) {
		t.Error("claude with no key and no login: not missing")
	}
	if claude.KeyMissing("", map[string]string{"HOME": home, "ANTHROPIC_API_KEY": "k"}) {
		t.Error("claude with its key: missing")
	}
	if !claude.KeyMissing("", map[string]string{"HOME": home, "ANTHROPIC_API_KEY": ""}) {
		t.Error("claude with an empty key: not missing")
	}
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte("{}"), 0o600)
	if claude.KeyMissing("", map[string]string{"HOME": home}) {
		t.Error("claude logged in: missing")
	}
	if codex.KeyMissing("api-key", map[string]string{"OPENAI_API_KEY": "k"}) {
		t.Error("codex with its second key: missing")
	}
	if codex.KeyMissing("chat-gpt", map[string]string{}) {
		t.Error("codex under chat-gpt: a key is missing")
	}
	goose, _ := LookupPreset("goose")
	if goose.KeyMissing("", map[string]string{}) {
		t.Error("goose, which names no key: missing")
	}
}

func TestClaudeNeedsIsSandboxAsRoot(t *testing.T) {
	claude, _ := LookupPreset("claude")
	if got := claude.RootMissing(map[string]string{}); !slices.Equal(got, []string{"IS_SANDBOX"}) {
		t.Errorf("without IS_SANDBOX: %v", got)
	}
	if got := claude.RootMissing(map[string]string{"IS_SANDBOX": "1"}); got != nil {
		t.Errorf("with IS_SANDBOX=1: %v", got)
	}
	codex, _ := LookupPreset("codex")
	if got := codex.RootMissing(map[string]string{}); got != nil {
		t.Errorf("codex: %v", got)
	}
}
