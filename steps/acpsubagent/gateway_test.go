package acpsubagent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Each preset's agent is pointed at the gateway where it reads its model
// from, gets the placeholder wherever it reads a key, loses the
// credentials it would prefer, and the key is in none of its variables.
func TestPointAtGatewayWiresEachPresetAndLeavesNoKey(t *testing.T) {
	const key, ph, url = "sk-real-key-123456", "acpflow-placeholder-abcdefghijklmnop", "http://127.0.0.1:4000/v1"
	for _, tc := range []struct {
		preset string
		env    map[string]string
		check  func(t *testing.T, env map[string]string)
	}{
		{"claude", map[string]string{"ANTHROPIC_AUTH_TOKEN": "tok", "MY_NOTE": "uses " + key}, func(t *testing.T, env map[string]string) {
			if env["ANTHROPIC_BASE_URL"] != url || env["ANTHROPIC_API_KEY"] != ph {
				t.Errorf("env = %v", env)
			}
			if _, ok := env["ANTHROPIC_AUTH_TOKEN"]; ok {
				t.Errorf("ANTHROPIC_AUTH_TOKEN was kept")
			}
		}},
		{"gemini", map[string]string{"GOOGLE_API_KEY": key}, func(t *testing.T, env map[string]string) {
			if env["GOOGLE_GEMINI_BASE_URL"] != url || env["GEMINI_API_KEY"] != ph || env["GOOGLE_API_KEY"] != "" {
				t.Errorf("env = %v", env)
			}
		}},
		{"opencode", map[string]string{"OPENCODE_CONFIG_CONTENT": `{"default_agent":"build","provider":{"openai":{"models":{"m":{}}}}}`}, func(t *testing.T, env map[string]string) {
			var cfg struct {
				DefaultAgent string `json:"default_agent"`
				Provider     map[string]struct {
					Models  map[string]any    `json:"models"`
					Options map[string]string `json:"options"`
				} `json:"provider"`
			}
			if err := json.Unmarshal([]byte(env["OPENCODE_CONFIG_CONTENT"]), &cfg); err != nil {
				t.Fatal(err)
			}
			o := cfg.Provider["openai"]
			if cfg.DefaultAgent != "build" || o.Models["m"] == nil || o.Options["baseURL"] != url || o.Options["apiKey"] != ph {
				t.Errorf("OPENCODE_CONFIG_CONTENT = %s: the preset's settings must stay, the provider point at the gateway", env["OPENCODE_CONFIG_CONTENT"])
			}
		}},
		{"codex", map[string]string{"CODEX_API_KEY": key}, func(t *testing.T, env map[string]string) {
			if env["CODEX_API_KEY"] != ph || env["OPENAI_API_KEY"] != ph {
				t.Errorf("env = %v", env)
			}
			var cfg struct {
				Provider  string `json:"model_provider"`
				Providers map[string]struct {
					BaseURL string `json:"base_url"`
					EnvKey  string `json:"env_key"`
				} `json:"model_providers"`
			}
			json.Unmarshal([]byte(env["CODEX_CONFIG"]), &cfg)
			if p := cfg.Providers[cfg.Provider]; p.BaseURL != url || p.EnvKey != "OPENAI_API_KEY" {
				t.Errorf("CODEX_CONFIG = %s", env["CODEX_CONFIG"])
			}
		}},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			w, ok := acpagent.GatewayOf(tc.preset)
			if !ok {
				t.Fatal("no wiring")
			}
			plan := &gatewayPlan{cfg: &steps.Gateway{}, wiring: w, key: key}
			if err := pointAtGateway(plan, tc.env, url, ph); err != nil {
				t.Fatal(err)
			}
			tc.check(t, tc.env)
			for k, v := range tc.env {
				if strings.Contains(v, key) {
					t.Errorf("%s holds the key", k)
				}
			}
		})
	}
	if _, ok := acpagent.GatewayOf("goose"); ok {
		t.Errorf("goose has a wiring: it cannot be pointed at a gateway")
	}
}
