package agentsetup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeNodeModules is a node_modules whose .bin holds every agent's name.
func fakeNodeModules(t *testing.T) string {
	t.Helper()
	nm := filepath.Join(t.TempDir(), "node_modules")
	if err := os.MkdirAll(filepath.Join(nm, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"claude-agent-acp", "codex-acp", "gemini"} {
		if err := os.WriteFile(filepath.Join(nm, ".bin", bin), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return nm
}

func TestSetup(t *testing.T) {
	const url = "http://127.0.0.1:4321"
	for _, tc := range []struct {
		name, bin, auth string
		env             []string          // entries Env must hold
		files           map[string]string // under HOME: a substring each must hold
	}{
		{"claude", "claude-agent-acp", "", []string{"ANTHROPIC_BASE_URL=" + url, "IS_SANDBOX=1"}, nil},
		{"codex", "codex-acp", "api-key", []string{"CODEX_API_KEY=sk-acpflow-dummy"},
			map[string]string{".codex/config.toml": `base_url = "` + url + `/v1"`}},
		{"gemini", "gemini", "gemini-api-key", []string{"GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_API_KEY=acpflow-dummy"},
			map[string]string{".gemini/settings.json": `"selectedType": "gemini-api-key"`}},
	} {
		t.Run("sets "+tc.name+" up for the model server", func(t *testing.T) {
			nm, home := fakeNodeModules(t), t.TempDir()
			a, err := Setup(tc.name, nm, home, url)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(nm, ".bin", tc.bin); a.Command != want {
				t.Errorf("Command = %q, want %q", a.Command, want)
			}
			if a.Auth != tc.auth || (tc.auth != "") != strings.Contains(a.YAML(), "auth: "+tc.auth) {
				t.Errorf("Auth = %q, YAML %q; want auth %q", a.Auth, a.YAML(), tc.auth)
			}
			for _, kv := range append([]string{"HOME=" + home}, tc.env...) {
				if !slices.Contains(a.Env, kv) {
					t.Errorf("Env %q lacks %q", a.Env, kv)
				}
			}
			for f, want := range tc.files {
				b, err := os.ReadFile(filepath.Join(home, f))
				if err != nil || !strings.Contains(string(b), want) {
					t.Errorf("%s: %v; want it to hold %q, got:\n%s", f, err, want, b)
				}
			}
			// What makes an agent ask is its preset's, never the test
			// HOME's: else the tests would prove what no user's run gets.
			for _, f := range []string{".codex/rules", ".gemini/policies", ".claude/settings.json", ".qwen/system-defaults.json"} {
				if _, err := os.Stat(filepath.Join(home, f)); err == nil {
					t.Errorf("%s was written into the test HOME: settings that make the agent ask belong to its preset", f)
				}
			}
		})
	}
	t.Run("an unknown agent is an error naming the known ones", func(t *testing.T) {
		_, err := Setup("goose", fakeNodeModules(t), t.TempDir(), url)
		if err == nil || !strings.Contains(err.Error(), "claude, codex, copilot, gemini") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("an agent not installed is an error saying how to install it", func(t *testing.T) {
		_, err := Setup("claude", t.TempDir(), t.TempDir(), url)
		if err == nil || !strings.Contains(err.Error(), "realagents/install.sh") {
			t.Errorf("err = %v", err)
		}
	})
}
