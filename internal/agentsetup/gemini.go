package agentsetup

import (
	"encoding/json"
	"path/filepath"
)

func init() {
	setups["gemini"] = func(a *Agent, home, modelURL string) error {
		a.Command, a.Auth = "gemini", "gemini-api-key"
		a.Env = append(a.Env, "GEMINI_API_KEY=acpflow-dummy", "GOOGLE_GEMINI_BASE_URL="+modelURL)
		return writeGeminiConfig(home)
	}
}

// geminiSettings is $HOME/.gemini/settings.json for gemini-cli 0.61: no
// telemetry, usage statistics, update check, IDE integration or
// checkpointing, so that it reaches nothing but the model server.
//
// Nothing here makes gemini ask: that is the gemini preset's
// (--admin-policy with a policy file acpflow writes for each spawn), so
// that the tests see what a user's run gets.
var geminiSettings = map[string]any{
	"general": map[string]any{
		"enableAutoUpdate":             false,
		"enableAutoUpdateNotification": false,
		"checkpointing":                map[string]any{"enabled": false},
	},
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
	"ide":       map[string]any{"enabled": false},
	"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
}

func writeGeminiConfig(home string) error {
	settings, err := json.MarshalIndent(geminiSettings, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(home, ".gemini")
	return writeFiles(map[string]string{
		filepath.Join(dir, "settings.json"): string(settings),
	})
}
